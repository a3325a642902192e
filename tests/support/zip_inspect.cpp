#include "support/zip_inspect.hpp"

#include <stdexcept>

#include <zlib.h>

namespace z2f::test {
namespace {

constexpr std::uint64_t kLimit = 0xFFFFFFFFu;

[[noreturn]] void fail(const std::string& what) {
    throw std::runtime_error("zip: " + what);
}

void expect(bool condition, const std::string& what) {
    if (!condition)
        fail(what);
}

// Little-endian cursor over a block read from the source.
class Fields {
  public:
    Fields(std::vector<std::byte> bytes, std::uint64_t base)
        : bytes_(std::move(bytes)), base_(base) {}
    std::uint64_t get(std::size_t width) {
        if (pos_ + width > bytes_.size())
            fail("field past the end at " + where());
        std::uint64_t value = 0;
        for (std::size_t i = 0; i < width; ++i) {
            value |= std::uint64_t{std::to_integer<std::uint8_t>(bytes_[pos_ + i])} << (8 * i);
        }
        pos_ += width;
        return value;
    }
    std::uint16_t u16() { return static_cast<std::uint16_t>(get(2)); }
    std::uint32_t u32() { return static_cast<std::uint32_t>(get(4)); }
    std::uint64_t u64() { return get(8); }
    std::string text(std::size_t size) {
        if (pos_ + size > bytes_.size())
            fail("text past the end at " + where());
        std::string out(reinterpret_cast<const char*>(bytes_.data() + pos_), size);
        pos_ += size;
        return out;
    }
    std::string where() const { return std::to_string(base_ + pos_); }

  private:
    std::vector<std::byte> bytes_;
    std::uint64_t base_;
    std::size_t pos_ = 0;
};

Fields read(const ByteSource& source, std::uint64_t offset, std::size_t size) {
    return Fields(source(offset, size), offset);
}

}  // namespace

ByteSource bytes_source(std::span<const std::byte> bytes) {
    return [bytes](std::uint64_t offset, std::size_t size) {
        if (offset > bytes.size() || size > bytes.size() - offset)
            fail("read past the end");
        auto first = bytes.begin() + static_cast<std::ptrdiff_t>(offset);
        return std::vector<std::byte>(first, first + static_cast<std::ptrdiff_t>(size));
    };
}

ZipArchiveInfo inspect_zip(const ByteSource& source, std::uint64_t file_size) {
    expect(file_size >= 98, "file too small for the end records");
    ZipArchiveInfo archive;

    // Classic end record, last 22 bytes.
    Fields end = read(source, file_size - 22, 22);
    expect(end.u32() == 0x06054b50, "end record signature");
    expect(end.u16() == 0 && end.u16() == 0, "end record disk numbers");
    std::uint16_t entries16 = end.u16();
    expect(end.u16() == entries16, "end record entry counts differ");
    std::uint32_t cd_size32 = end.u32();
    std::uint32_t cd_offset32 = end.u32();
    expect(end.u16() == 0, "end record comment");

    // ZIP64 locator right before it.
    Fields locator = read(source, file_size - 42, 20);
    expect(locator.u32() == 0x07064b50, "zip64 locator signature");
    expect(locator.u32() == 0, "zip64 locator disk");
    archive.zip64_end_offset = locator.u64();
    expect(locator.u32() == 1, "zip64 locator disk count");
    expect(archive.zip64_end_offset == file_size - 98,
           "zip64 end record not right before the locator");

    Fields zip64_end = read(source, archive.zip64_end_offset, 56);
    expect(zip64_end.u32() == 0x06064b50, "zip64 end record signature");
    expect(zip64_end.u64() == 44, "zip64 end record size");
    expect(zip64_end.u16() == 0x031E, "zip64 end record version made by");
    expect(zip64_end.u16() == 45, "zip64 end record version needed");
    expect(zip64_end.u32() == 0 && zip64_end.u32() == 0, "zip64 end record disks");
    std::uint64_t entries = zip64_end.u64();
    expect(zip64_end.u64() == entries, "zip64 entry counts differ");
    archive.cd_size = zip64_end.u64();
    archive.cd_offset = zip64_end.u64();
    expect(archive.cd_offset + archive.cd_size == archive.zip64_end_offset,
           "central directory does not end at the zip64 end record");
    expect(entries16 == std::min<std::uint64_t>(entries, 0xFFFF), "end record entry count");
    expect(cd_size32 == std::min(archive.cd_size, kLimit), "end record cd size");
    expect(cd_offset32 == std::min(archive.cd_offset, kLimit), "end record cd offset");

    // Central directory.
    Fields cd = read(source, archive.cd_offset, archive.cd_size);
    for (std::uint64_t i = 0; i < entries; ++i) {
        ZipRecordInfo record;
        expect(cd.u32() == 0x02014b50, "central header signature at " + cd.where());
        expect(cd.u16() == 0 && cd.u16() == 0, "central header versions");
        record.flags = cd.u16();
        expect(cd.u16() == 0, "central header method");
        expect(cd.u16() == 0 && cd.u16() == 0, "central header time/date");
        record.crc = cd.u32();
        std::uint32_t csize = cd.u32();
        std::uint32_t usize = cd.u32();
        expect(csize == usize, "stored record with csize != usize");
        std::uint16_t name_len = cd.u16();
        std::uint16_t extra_len = cd.u16();
        expect(cd.u16() == 0 && cd.u16() == 0 && cd.u16() == 0 && cd.u32() == 0,
               "central header comment/disk/attributes");
        std::uint32_t offset32 = cd.u32();
        record.name = cd.text(name_len);
        record.size = usize;
        record.local_header_offset = offset32;
        if (extra_len > 0) {
            record.central_zip64 = true;
            expect(cd.u16() == 0x0001, record.name + ": central extra is not zip64");
            std::uint16_t len = cd.u16();
            expect(len + 4u == extra_len, record.name + ": central zip64 length");
            std::uint16_t expected_len = 0;
            if (usize == kLimit) {
                record.size = cd.u64();
                expect(cd.u64() == record.size, record.name + ": zip64 csize != usize");
                expected_len += 16;
            }
            if (offset32 == kLimit) {
                record.local_header_offset = cd.u64();
                expected_len += 8;
            }
            expect(len == expected_len && len > 0, record.name + ": zip64 field has extra data");
        }
        expect((record.size >= kLimit) == (usize == kLimit), record.name + ": size clamping");
        expect((record.local_header_offset >= kLimit) == (offset32 == kLimit),
               record.name + ": offset clamping");
        expect(record.flags == (record.size > 0 ? 0x0808 : 0x0800), record.name + ": flags");
        if (record.size == 0)
            expect(record.crc == 0, record.name + ": empty record with a CRC");
        archive.records.push_back(record);
    }

    // Local headers, back to back from offset 0.
    std::uint64_t expected_offset = 0;
    for (ZipRecordInfo& record : archive.records) {
        expect(record.local_header_offset == expected_offset,
               record.name + ": local header not right after the previous record");
        Fields local = read(source, record.local_header_offset, 30);
        expect(local.u32() == 0x04034b50, record.name + ": local header signature");
        expect(local.u16() == 0, record.name + ": local version needed");
        expect(local.u16() == record.flags, record.name + ": local flags differ from central");
        expect(local.u16() == 0 && local.u16() == 0 && local.u16() == 0,
               record.name + ": local method/time/date");
        expect(local.u32() == 0 && local.u32() == 0 && local.u32() == 0,
               record.name + ": local crc/sizes are not zero");
        std::uint16_t name_len = local.u16();
        std::uint16_t extra_len = local.u16();
        Fields rest = read(source, record.local_header_offset + 30, name_len + extra_len);
        expect(rest.text(name_len) == record.name, record.name + ": local name differs");
        std::uint64_t consumed = 0;
        bool big_size = record.size >= kLimit;
        bool big_offset = record.local_header_offset >= kLimit;
        if (big_size || big_offset) {
            record.local_zip64 = true;
            expect(rest.u16() == 0x0001, record.name + ": local zip64 field missing");
            std::uint16_t len = rest.u16();
            expect(len == (big_size ? 16 : 0) + (big_offset ? 8 : 0),
                   record.name + ": local zip64 length");
            if (big_size) {
                expect(rest.u64() == record.size, record.name + ": local zip64 usize");
                expect(rest.u64() == 0, record.name + ": local zip64 csize (miniz writes 0)");
            }
            if (big_offset) {
                expect(rest.u64() == record.local_header_offset,
                       record.name + ": local zip64 offset");
            }
            consumed += 4u + len;
        }
        expect(rest.u16() == ('F' | ('B' << 8)), record.name + ": FB field missing");
        record.padding = rest.u16();
        expect(rest.text(record.padding) == std::string(record.padding, 'Z'),
               record.name + ": FB padding is not 'Z'");
        consumed += 4 + record.padding;
        expect(consumed == extra_len, record.name + ": extra field has unknown content");
        record.data_offset = record.local_header_offset + 30 + name_len + extra_len;
        expect(record.data_offset % 64 == 0, record.name + ": data not 64-byte aligned");
        expect(record.padding < 64, record.name + ": padding of a whole block");

        expected_offset = record.data_offset + record.size;
        if (record.size > 0) {
            record.descriptor_size = record.local_zip64 ? 24 : 16;
            Fields descriptor = read(source, expected_offset, record.descriptor_size);
            expect(descriptor.u32() == 0x08074b50, record.name + ": descriptor signature");
            expect(descriptor.u32() == record.crc, record.name + ": descriptor crc");
            std::size_t width = record.local_zip64 ? 8 : 4;
            expect(descriptor.get(width) == record.size && descriptor.get(width) == record.size,
                   record.name + ": descriptor sizes");
            expected_offset += record.descriptor_size;
        }
    }
    expect(expected_offset == archive.cd_offset, "central directory not right after the records");
    if (!archive.records.empty()) {
        const std::string& first = archive.records.front().name;
        std::string prefix = first.substr(0, first.find('/') + 1);
        for (const ZipRecordInfo& record : archive.records) {
            expect(record.name.rfind(prefix, 0) == 0, record.name + ": outside the archive folder");
        }
    }
    return archive;
}

void check_crcs(const ByteSource& source, const ZipArchiveInfo& archive) {
    for (const ZipRecordInfo& record : archive.records) {
        std::vector<std::byte> data = source(record.data_offset, record.size);
        auto crc = static_cast<std::uint32_t>(::crc32(
            0, reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(data.size())));
        expect(crc == record.crc, record.name + ": CRC mismatch");
    }
}

}  // namespace z2f::test
