#include "support/zip_builder.hpp"

#include <zlib.h>

#include "common/bytes.hpp"

namespace z2f::testing {

std::vector<std::byte> bytes_of(const std::string& text) {
    std::vector<std::byte> out(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
        out[i] = static_cast<std::byte>(text[i]);
    }
    return out;
}

std::vector<std::byte> build_zip(const std::vector<ZipBuilderEntry>& entries,
                                 const ZipBuilderOptions& options) {
    ByteWriter out;
    struct Placed {
        std::uint64_t offset;
        std::uint32_t crc;
    };
    std::vector<Placed> placed;
    for (const auto& entry : entries) {
        std::uint32_t crc = entry.crc_override.value_or(
            static_cast<std::uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(entry.data.data()),
                                             static_cast<uInt>(entry.data.size()))));
        std::uint64_t offset = out.size();
        std::size_t extra = entry.local_extra_padding;
        if (entry.align64) {
            std::size_t start = offset + 30 + entry.name.size() + extra + 4;
            extra += 4 + (64 - start % 64) % 64;
        }
        out.put<std::uint32_t>(0x04034b50);
        out.put<std::uint16_t>(0);
        out.put<std::uint16_t>(options.data_descriptors ? 0x0808 : 0x0800);
        out.put<std::uint16_t>(entry.method);
        out.put<std::uint16_t>(0);
        out.put<std::uint16_t>(0);
        out.put<std::uint32_t>(options.data_descriptors ? 0 : crc);
        auto size = static_cast<std::uint32_t>(entry.data.size());
        out.put<std::uint32_t>(options.data_descriptors ? 0 : size);
        out.put<std::uint32_t>(options.data_descriptors ? 0 : size);
        out.put<std::uint16_t>(static_cast<std::uint16_t>(entry.name.size()));
        out.put<std::uint16_t>(static_cast<std::uint16_t>(extra));
        out.put_text(entry.name);
        if (entry.align64) {
            out.put_text("FB");
            out.put<std::uint16_t>(static_cast<std::uint16_t>(extra - 4));
            out.put_repeated(std::byte{'Z'}, extra - 4);
        } else {
            out.put_repeated(std::byte{'Z'}, extra);
        }
        out.put_bytes(entry.data);
        if (options.data_descriptors) {
            out.put<std::uint32_t>(0x08074b50);
            out.put<std::uint32_t>(crc);
            out.put<std::uint32_t>(size);
            out.put<std::uint32_t>(size);
        }
        placed.push_back({offset, crc});
    }
    std::uint64_t cd_offset = out.size();
    for (std::size_t i = 0; i < entries.size(); ++i) {
        const auto& entry = entries[i];
        bool sat = options.zip64_extra_fields;
        out.put<std::uint32_t>(0x02014b50);
        out.put<std::uint16_t>(0);
        out.put<std::uint16_t>(0);
        out.put<std::uint16_t>(0x0808);
        out.put<std::uint16_t>(entry.method);
        out.put<std::uint16_t>(0);
        out.put<std::uint16_t>(0);
        out.put<std::uint32_t>(placed[i].crc);
        auto size = static_cast<std::uint32_t>(entry.data.size());
        out.put<std::uint32_t>(sat ? 0xFFFFFFFF : size);
        out.put<std::uint32_t>(sat ? 0xFFFFFFFF : size);
        out.put<std::uint16_t>(static_cast<std::uint16_t>(entry.name.size()));
        out.put<std::uint16_t>(sat ? 28 : 0);
        out.put<std::uint16_t>(0);
        out.put<std::uint16_t>(0);
        out.put<std::uint16_t>(0);
        out.put<std::uint32_t>(0);
        out.put<std::uint32_t>(sat ? 0xFFFFFFFF : static_cast<std::uint32_t>(placed[i].offset));
        out.put_text(entry.name);
        if (sat) {
            out.put<std::uint16_t>(0x0001);
            out.put<std::uint16_t>(24);
            out.put<std::uint64_t>(entry.data.size());
            out.put<std::uint64_t>(entry.data.size());
            out.put<std::uint64_t>(placed[i].offset);
        }
    }
    std::uint64_t cd_size = out.size() - cd_offset;
    if (options.zip64_end) {
        std::uint64_t zip64_offset = out.size();
        out.put<std::uint32_t>(0x06064b50);
        out.put<std::uint64_t>(44);
        out.put<std::uint16_t>(45);
        out.put<std::uint16_t>(45);
        out.put<std::uint32_t>(0);
        out.put<std::uint32_t>(0);
        out.put<std::uint64_t>(entries.size());
        out.put<std::uint64_t>(entries.size());
        out.put<std::uint64_t>(cd_size);
        out.put<std::uint64_t>(cd_offset);
        out.put<std::uint32_t>(0x07064b50);
        out.put<std::uint32_t>(0);
        out.put<std::uint64_t>(zip64_offset);
        out.put<std::uint32_t>(1);
    }
    out.put<std::uint32_t>(0x06054b50);
    out.put<std::uint16_t>(0);
    out.put<std::uint16_t>(0);
    auto count = static_cast<std::uint16_t>(options.zip64_end ? 0xFFFF : entries.size());
    out.put<std::uint16_t>(count);
    out.put<std::uint16_t>(count);
    out.put<std::uint32_t>(options.zip64_end ? 0xFFFFFFFF : static_cast<std::uint32_t>(cd_size));
    out.put<std::uint32_t>(options.zip64_end ? 0xFFFFFFFF : static_cast<std::uint32_t>(cd_offset));
    out.put<std::uint16_t>(0);
    return out.take();
}

}  // namespace z2f::testing
