// Test-only: an independent, strict reader of the torch zip archives our writer produces.
//
// It walks the archive from the end (end record, ZIP64 locator, ZIP64 end record, central
// directory), then visits every local header, extra field and data descriptor, and checks each
// field against the conventions written down in container/zip_writer.hpp: torch's 64-byte data
// alignment and FB padding, miniz's flags and zip64 fields, records packed back to back with no
// gap. The bytes come through a callback, so a multi-GiB archive can be checked from its header
// regions alone (the data is never read). Any deviation throws std::runtime_error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace z2f::test {

// Returns `size` bytes at `offset` of the archive.
using ByteSource = std::function<std::vector<std::byte>(std::uint64_t offset, std::size_t size)>;

ByteSource bytes_source(std::span<const std::byte> bytes);

struct ZipRecordInfo {
    std::string name;
    std::uint64_t local_header_offset = 0;
    std::uint64_t data_offset = 0;
    std::uint64_t size = 0;
    std::uint32_t crc = 0;  // from the central directory
    std::uint16_t flags = 0;
    std::uint64_t padding = 0;          // 'Z' bytes of the FB field
    bool local_zip64 = false;           // the local header carries a zip64 field
    bool central_zip64 = false;         // the central header carries a zip64 field
    std::uint64_t descriptor_size = 0;  // 0, 16 or 24
};

struct ZipArchiveInfo {
    std::vector<ZipRecordInfo> records;
    std::uint64_t cd_offset = 0;
    std::uint64_t cd_size = 0;
    std::uint64_t zip64_end_offset = 0;
};

ZipArchiveInfo inspect_zip(const ByteSource& source, std::uint64_t file_size);

// CRC-32 of every record's data compared with the central directory (reads all data).
void check_crcs(const ByteSource& source, const ZipArchiveInfo& archive);

}  // namespace z2f::test
