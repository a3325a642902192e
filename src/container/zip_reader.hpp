// Reader of the zip container that torch.save writes (PyTorch >= 1.6 "zip" serialization).
//
// The byte format is written down in zip_format.hpp.
//
// Sizes and offsets always come from the central directory (local sizes are zero); a record's
// data starts at local_header_offset + 30 + name_len + extra_len, with the lengths read from
// the *local* header (the extra fields of the two headers differ). All records live under one
// folder, the archive prefix, taken from the first entry (PyTorchStreamReader does the same).
//
// The reader parses the directory only: it hands out (offset, length) of records and never
// reads storage bytes, so opening a 100 GB optimizer file costs a few small reads.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "io/posix_file.hpp"

namespace z2f::container {

struct ZipRecord {
    std::string name;  // relative to the archive prefix, e.g. "data.pkl", "data/3"
    std::uint16_t method = 0;
    std::uint16_t flags = 0;
    std::uint32_t crc32 = 0;
    std::uint64_t compressed_size = 0;
    std::uint64_t size = 0;
    std::uint64_t local_header_offset = 0;
};

class TorchArchive {
  public:
    // Parses the directory of a torch zip file. Refuses, with a message naming the file, the
    // legacy (pre-zip) torch format, non-zip files, truncated or inconsistent directories,
    // entries outside the archive folder, and big-endian archives.
    static TorchArchive open(const io::File& file);

    const std::string& path() const noexcept { return path_; }
    std::uint64_t file_size() const noexcept { return file_size_; }
    // The archive folder without its trailing slash, e.g. "archive" or "mp_rank_00_model_states".
    const std::string& prefix() const noexcept { return prefix_; }
    const std::vector<ZipRecord>& records() const noexcept { return records_; }

    const ZipRecord* find(std::string_view name) const noexcept;
    // The record, or an input error "missing record '<prefix>/<name>'".
    const ZipRecord& require(std::string_view name) const;

    // File offset of the record's first data byte, from its local header. Checks that the record
    // is STORED (method 0), unencrypted, and that its data lies inside the file.
    std::uint64_t data_offset(const io::File& file, const ZipRecord& record) const;

    // Reads a whole stored record (e.g. data.pkl) whose size is at most max_bytes, and checks
    // its CRC-32 unless the archive recorded 0 (torch can be told not to compute CRCs).
    std::vector<std::byte> read_record(const io::File& file, const ZipRecord& record,
                                       std::uint64_t max_bytes) const;

  private:
    std::string path_;
    std::uint64_t file_size_ = 0;
    std::string prefix_;
    std::vector<ZipRecord> records_;     // in central-directory order
    std::vector<std::uint32_t> sorted_;  // indices of records_ sorted by name, for find()
};

// What the first bytes of a file say it is; used for early, clear refusals.
enum class TorchFileKind { kZip, kLegacyPickle, kLegacyTar, kPreviewZip, kUnknown };
TorchFileKind sniff_torch_file(std::span<const std::byte> first_bytes) noexcept;

}  // namespace z2f::container
