// Byte counts for people, both ways.
//
// Printing: "805.9 MB", "1.62 TB". Decimal units (kB, MB, GB, TB = powers of 1000), the units
// Hugging Face uses for shard sizes, so that the sizes we print compare with --max-shard-size at
// a glance.
//
// Parsing (the one parser of every size option, --max-shard-size and --buffer-size alike),
// after stripping surrounding whitespace:
// - digits only, e.g. "5000000000": a byte count;
// - <number><unit>, whitespace allowed between them: the number is a Python float literal
//   (optional sign, digits with an optional fraction, optional exponent, '_' between digits:
//   "1.5GB", "1e3KB"), the unit, compared case-insensitively, is one of
//     B; kB, MB, GB, TB (powers of 1000, as huggingface_hub's parse_size_to_int reads them);
//     KiB, MiB, GiB, TiB (powers of 1024);
// - the byte count is int(number * multiplier), a product of two doubles truncated toward zero
//   as Python's int() does ("1.1KB" -> 1100, as huggingface_hub computes it).
// Negative sizes, infinities, NaN and sizes of 2^64 bytes or more are refused. Every refusal is
// a usage error that quotes the user's text and the option's name and lists the units.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace z2f {

std::string format_byte_size(std::uint64_t bytes);

// "1,234,567": a count with thousands separators, for exact sizes and counts in messages.
std::string with_commas(std::uint64_t value);

// "2.5s" below a minute, else "h:mm:ss".
std::string format_duration(double seconds);

// `option` is the option's name as the user typed it ("--max_shard_size"), for messages.
std::uint64_t parse_byte_size(std::string_view text, std::string_view option);

// "kB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024)", for help texts.
extern const char* const kByteSizeUnits;

}  // namespace z2f
