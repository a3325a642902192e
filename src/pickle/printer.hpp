// Indented, human-readable rendering of a pickle value tree (used by zero2fp32-inspect).
//
// Safe on hostile trees: depth and total output are capped, and an object met again on the
// path from the root (a cycle) is printed as a back reference instead of being followed.
#pragma once

#include <functional>
#include <ostream>
#include <string>

#include "pickle/value.hpp"

namespace z2f::pickle {

// The printer recurses once per level of nesting, so it prints at most this many levels
// whatever max_depth asks for. The machine's nesting cap cannot stand in for it: a container
// filled after it was itself nested (or a cycle) makes paths through the value graph longer
// than the depth recorded when each value was built, and 5000 such levels, a 30 KB pickle,
// overflowed the stack of `zero2fp32-inspect --depth 1000000` (ASan builds: 2000 levels).
inline constexpr std::uint32_t kMaxPrintDepth = 256;

struct PrintOptions {
    std::uint32_t max_depth = 48;  // at most kMaxPrintDepth
    std::uint64_t max_lines = 200000;
    std::uint32_t max_string = 200;  // longer strings and bytes are shortened
    // Extra text appended to a tensor line (e.g. its resolved file offset); may be empty.
    std::function<std::string(const Tensor&)> describe_tensor;
};

void print_value(std::ostream& out, const Value& value, const PrintOptions& options = {});

// One-line summary of a tensor: "tensor fp32 [53, 37] stride [37, 1] storage data/3 ...".
std::string tensor_summary(const Tensor& tensor);

}  // namespace z2f::pickle
