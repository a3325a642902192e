// Writing the zip archives torch.save produces: layout arithmetic, the header bytes, and a
// sequential writer on top of them.
//
// The bytes are those of zip_format.hpp, exactly as torch.save writes them: time and date 0 and
// nothing random, so an archive is a pure function of its records. CRCs are real CRC-32s:
// torch.load never checks them, Python's zipfile does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "common/bytes.hpp"
#include "container/zip_format.hpp"
#include "io/posix_file.hpp"

namespace z2f::container::zip {

// Number of 'Z' bytes in the FB field of a record whose local header starts at
// `local_header_offset`, with a full name of `name_size` bytes and `data_size` bytes of data.
// torch's getPadding: start = offset + 30 + name + 4 (FB field header); plus 4 (zip64 field
// header) when the size or the offset is >= 0xFFFFFFFF, plus 16 more when the size is, plus 8
// more when the offset is; the padding brings start up to the next multiple of 64.
std::uint64_t torch_padding(std::uint64_t local_header_offset, std::uint64_t name_size,
                            std::uint64_t data_size) noexcept;

// Where the parts of one record land, computed from its header offset, name and size alone.
struct RecordPlacement {
    std::uint64_t local_header_offset = 0;
    std::uint64_t name_size = 0;
    std::uint64_t size = 0;
    std::uint64_t padding = 0;  // 'Z' bytes in the FB field

    bool zip64_size() const noexcept { return size >= kZip64Limit; }
    bool zip64_offset() const noexcept { return local_header_offset >= kZip64Limit; }
    bool needs_zip64() const noexcept { return zip64_size() || zip64_offset(); }
    bool has_descriptor() const noexcept { return size > 0; }
    std::uint16_t flags() const noexcept {
        return has_descriptor() ? kFlagsWithDescriptor : kFlagsEmpty;
    }
    // Bytes of the zip64 field (header included) in the local header; 0 when absent.
    std::uint64_t local_zip64_size() const noexcept;
    // Bytes of the zip64 field in the central header; 0 when absent.
    std::uint64_t central_zip64_size() const noexcept;
    std::uint64_t local_extra_size() const noexcept { return local_zip64_size() + 4 + padding; }
    std::uint64_t local_header_size() const noexcept {
        return kLocalHeaderSize + name_size + local_extra_size();
    }
    std::uint64_t data_offset() const noexcept { return local_header_offset + local_header_size(); }
    std::uint64_t descriptor_offset() const noexcept { return data_offset() + size; }
    std::uint64_t descriptor_size() const noexcept {
        return has_descriptor() ? (needs_zip64() ? 24 : 16) : 0;
    }
    // Where the next record's local header goes.
    std::uint64_t end_offset() const noexcept { return descriptor_offset() + descriptor_size(); }
    std::uint64_t central_header_size() const noexcept {
        return kCentralHeaderSize + name_size + central_zip64_size();
    }
};

// Places a record whose local header starts at `local_header_offset`. Throws an internal error
// for names longer than a zip can hold.
RecordPlacement place_record(std::uint64_t local_header_offset, std::string_view full_name,
                             std::uint64_t size);

// Header bytes, appended to `out`; `full_name` must be the name the record was placed with.
void write_local_header(ByteWriter& out, std::string_view full_name, const RecordPlacement& record);
void write_data_descriptor(ByteWriter& out, const RecordPlacement& record, std::uint32_t crc);
void write_central_header(ByteWriter& out, std::string_view full_name,
                          const RecordPlacement& record, std::uint32_t crc);
// The three end records; the ZIP64 end record starts at cd_offset + cd_size.
void write_end_records(ByteWriter& out, std::uint64_t entries, std::uint64_t cd_offset,
                       std::uint64_t cd_size);

// The folder torch.save(path) puts every record in: the file's base name without its last
// extension ("out/pytorch_model-00001-of-00002.bin" -> "pytorch_model-00001-of-00002").
// "archive" (what torch uses for buffers) when nothing is left.
std::string torch_archive_name(std::string_view file_name);

// Writes a torch zip archive record by record, sequentially, with the byte conventions above:
// for tools that produce whole archives (the synthetic checkpoint generator, tests). The file
// is created (truncated) at construction; an archive is complete only after finish().
//
//     TorchZipWriter zip(path);                 // folder = torch_archive_name(path)
//     zip.add_record("data.pkl", pickle_bytes);
//     zip.add_record("byteorder", as_byte_span("little"));
//     zip.add_record_from("data/0", n, [&](std::uint64_t at, std::span<std::byte> out) {...});
//     zip.finish();                             // adds "version" = "3\n" if not written
class TorchZipWriter {
  public:
    // Fills `out` with bytes [offset, offset + out.size()) of the record.
    using ChunkProducer = std::function<void(std::uint64_t offset, std::span<std::byte> out)>;

    explicit TorchZipWriter(const std::string& path);
    TorchZipWriter(const std::string& path, std::string archive_name);

    // `name` is relative to the archive folder ("data.pkl", "data/0", ...).
    void add_record(std::string_view name, std::span<const std::byte> data);
    void add_record_from(std::string_view name, std::uint64_t size, const ChunkProducer& produce);
    // A record of `size` zero bytes that are never written: the data region stays a hole of
    // the file (no blocks allocated on file systems with sparse files), and reads as zeros.
    // The CRC is that of the zeros. For synthetic checkpoints of sizes no disk could hold.
    void add_zero_record(std::string_view name, std::uint64_t size);
    // Writes the "version" record unless one was added (as torch's writeEndOfFile does), the
    // central directory and the end records, then closes the file.
    void finish();

    const std::string& archive_name() const noexcept { return archive_name_; }
    std::uint64_t bytes_written() const noexcept { return cursor_; }

  private:
    struct Written {
        std::string full_name;
        RecordPlacement placement;
        std::uint32_t crc = 0;
    };
    RecordPlacement begin_record(std::string_view name, std::uint64_t size);
    void end_record(RecordPlacement placement, std::uint32_t crc);

    io::File file_;
    std::string archive_name_;
    std::uint64_t cursor_ = 0;
    std::vector<Written> records_;
    std::unordered_set<std::string> names_;
    bool wrote_version_ = false;
    bool finished_ = false;
};

}  // namespace z2f::container::zip
