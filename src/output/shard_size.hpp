// The --max-shard-size option (also --max_shard_size, zero_to_fp32's spelling): a size as
// common/byte_size.hpp parses it, so that a decimal value given to zero_to_fp32.py means the
// same bytes here as in huggingface_hub (docs/output-formats.md §4.4), and binary units are
// accepted besides; or "none" (any case) for one output file (std::nullopt). A size of 0
// bytes is refused: huggingface_hub's greedy split would put every tensor in a shard of its
// own, which nobody asks for on purpose.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace z2f::output {

// `option` is the option's name as typed, for messages.
std::optional<std::uint64_t> parse_max_shard_size(std::string_view text,
                                                  std::string_view option = "--max-shard-size");

}  // namespace z2f::output
