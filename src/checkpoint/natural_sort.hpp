// The natural order zero_to_fp32 sorts checkpoint files in (docs/deepspeed-format.md §1.3):
// names are split into maximal digit and non-digit runs, digit runs compare by numeric value (any
// length, leading zeros ignored), other runs by code point, and a shorter run list sorts first.
// So "zero_pp_rank_2_..." < "zero_pp_rank_10_...", which plain string order gets wrong.
#pragma once

#include <string_view>

namespace z2f::checkpoint {

bool natural_less(std::string_view a, std::string_view b) noexcept;

}  // namespace z2f::checkpoint
