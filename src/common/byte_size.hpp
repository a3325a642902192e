// Byte counts for people: "805.9 MB", "1.62 TB". Decimal units (kB, MB, GB, TB = powers of
// 1000), the units Hugging Face uses for shard sizes, so that the sizes we print compare with
// --max-shard-size at a glance.
#pragma once

#include <cstdint>
#include <string>

namespace z2f {

std::string format_byte_size(std::uint64_t bytes);

// "2.5s" below a minute, else "h:mm:ss".
std::string format_duration(double seconds);

}  // namespace z2f
