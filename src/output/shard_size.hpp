// The --max_shard_size option: huggingface_hub's `parse_size_to_int` rules, so that a value
// given to zero_to_fp32.py means the same bytes here (docs/output-formats.md §4.4).
//
// Grammar, after stripping surrounding whitespace:
// - "none" (any case): no sharding, one output file          -> std::nullopt
// - digits only, e.g. "5000000000": a byte count (an extension: huggingface_hub takes an int
//   argument as bytes, but its string parser would reject this form)
// - <number><unit>: the unit is the LAST TWO characters, compared case-insensitively, and must
//   be one of KB, MB, GB, TB, all decimal (KB = 10^3 ... TB = 10^12). "5GiB" therefore has the
//   unit "IB" and is rejected, as in huggingface_hub. The number (whitespace allowed between it
//   and the unit) is a Python float literal: optional sign, digits with an optional fraction,
//   optional exponent, '_' between digits; "1.5GB" is allowed.
// - the byte count is int(number * multiplier): the product of two doubles, truncated toward
//   zero, exactly like Python's `int(value * multiplier)` ("1.1KB" -> 1100).
// Negative, infinite and NaN sizes, and sizes of 2^64 bytes or more, are rejected. Every
// rejection is a usage error that quotes the value and says what is accepted.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace z2f::output {

std::optional<std::uint64_t> parse_max_shard_size(std::string_view text);

}  // namespace z2f::output
