// Reader of the zip container that torch.save writes (PyTorch >= 1.6 "zip" serialization).
//
// Byte format (all integers little-endian; the PKWARE APPNOTE is the reference):
//
//   local header   "PK\3\4" u16 version u16 flags u16 method u16 time u16 date u32 crc
//                  u32 csize u32 usize u16 name_len u16 extra_len, name, extra, then the data.
//                  torch writes flags 0x0808 (data descriptor follows, UTF-8 names) and zero
//                  sizes here; its "FB" extra field pads the data to a 64-byte file offset.
//   central dir    "PK\1\2" u16 made_by u16 needed u16 flags u16 method u16 time u16 date
//   (46 bytes +)   u32 crc u32 csize u32 usize u16 name_len u16 extra_len u16 comment_len
//                  u16 disk u16 int_attr u32 ext_attr u32 local_header_offset, name, extra,
//                  comment. 0xFFFFFFFF in csize/usize/offset means "see the ZIP64 extra field"
//                  (id 0x0001: the 8-byte usize, csize, offset that were saturated, in order).
//   zip64 end      "PK\6\6" u64 record_size u16 made_by u16 needed u32 disk u32 cd_disk
//   (56 bytes)     u64 entries_on_disk u64 entries u64 cd_size u64 cd_offset
//   zip64 locator  "PK\6\7" u32 disk u64 zip64_end_offset u32 disks            (20 bytes)
//   end record     "PK\5\6" u16 disk u16 cd_disk u16 entries_on_disk u16 entries
//   (22 bytes +)   u32 cd_size u32 cd_offset u16 comment_len, comment
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
