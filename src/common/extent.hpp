// Byte ranges of input files: what the plan reads and the copy engine copies. Kept here, below
// every layer that uses them, so that io/ needs nothing from the plan.
#pragma once

#include <cstdint>
#include <string>

namespace z2f {

// A byte range of one input file. `file` indexes the plan's input list.
struct SourceExtent {
    std::uint32_t file = 0;
    std::uint64_t offset = 0;
    std::uint64_t length = 0;

    friend bool operator==(const SourceExtent&, const SourceExtent&) = default;
};

// An input file the plan reads from, with the size it had when its metadata was read.
struct InputFile {
    std::string path;
    std::uint64_t size = 0;
};

// A stored zip record of an input file that holds tensor bytes: where its data lies and the
// CRC-32 the zip directory records for it (0 when the writer computed none: torch's
// `_set_crc32_options(False)`). The copy engine checks every record it reads from against it.
// A storage of a file in torch's legacy non-zip format is a record too, with CRC 0: that
// format has no checksums at all (`format_has_no_crc`).
struct InputRecord {
    std::uint32_t file = 0;
    std::uint64_t offset = 0;  // absolute file offset of the first data byte
    std::uint64_t length = 0;
    std::uint32_t crc32 = 0;
    std::string name;  // "archive/data/3" or "storage 94823712", for messages
    bool format_has_no_crc = false;

    std::uint64_t end() const noexcept { return offset + length; }
    friend bool operator==(const InputRecord&, const InputRecord&) = default;
};

// Bytes of a copy's source extents whose CRC-32 goes to check piece `piece`
// (run/input_check.hpp): bytes [offset, offset + length) of the input file, which are those of
// extents `extent`, `extent + stride`, ... (`extents` of them) of the copy. Several extents only
// when each starts in the file where the one before it ends, so that the range holds the first
// from `offset` to its end, the others whole, and the last from its start: a shard's rows of a
// row-parallel weight, which the copy reads every `stride`-th extent (TP degree) in file order,
// are one range, not one per row.
struct CrcRange {
    std::uint32_t extent = 0;
    std::uint32_t extents = 1;
    std::uint32_t stride = 1;
    std::uint64_t offset = 0;
    std::uint64_t length = 0;
    std::uint32_t piece = 0;

    std::uint32_t last_extent() const { return extent + (extents - 1) * stride; }
    // Whether extent `e` of the copy is one of the range's.
    bool holds_extent(std::uint32_t e) const {
        return e >= extent && e <= last_extent() && (e - extent) % stride == 0;
    }

    friend bool operator==(const CrcRange&, const CrcRange&) = default;
};

}  // namespace z2f
