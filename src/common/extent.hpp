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

}  // namespace z2f
