// Builds small zip archives byte by byte for reader tests, with knobs to produce every variant
// the reader must handle (ZIP64 end records, ZIP64 extra fields, data descriptors, odd local
// extra fields) and to break any field on purpose. Independent of the production writer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace z2f::testing {

struct ZipBuilderEntry {
    std::string name;  // full name, including the archive folder
    std::vector<std::byte> data;
    std::uint16_t method = 0;
    std::optional<std::uint32_t> crc_override;
    std::uint16_t local_extra_padding = 0;  // extra bytes in the local header only
    bool align64 = true;                    // pad the local extra field so data is 64-aligned
};

struct ZipBuilderOptions {
    bool zip64_end = true;            // write ZIP64 end record + locator (torch always does)
    bool zip64_extra_fields = false;  // saturate csize/usize/offset with 0xFFFFFFFF in the CD
    bool data_descriptors = true;     // zero sizes in local headers + PK\7\8 after the data
};

std::vector<std::byte> build_zip(const std::vector<ZipBuilderEntry>& entries,
                                 const ZipBuilderOptions& options = {});

std::vector<std::byte> bytes_of(const std::string& text);

}  // namespace z2f::testing
