// Lists of names in one line of a message: the first few, then how many more ("a, b, c and
// 2,117 more"), so that a universal checkpoint's thousands of files stay one line; the full list
// goes where a reader asks for it (-v, --summary-json).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace z2f {

inline constexpr std::size_t kNamesShown = 5;

// All of `names` when there are at most `shown` (or `shown` is 0), else the first `shown` and
// " and N more".
std::string listed_names(const std::vector<std::string>& names, std::size_t shown = kNamesShown);

}  // namespace z2f
