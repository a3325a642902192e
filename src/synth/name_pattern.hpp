// Selecting parameters by a regular expression (ECMAScript syntax, searched anywhere in the
// name, as Python's re.search would). Kept apart: <regex> is the one header of the program that
// needs a warning relaxed (see src/CMakeLists.txt).
#pragma once

#include <string>
#include <vector>

namespace z2f::synth {

// For each name, whether `pattern` matches part of it. An invalid pattern is a usage error
// naming `option`.
std::vector<bool> search_names(const std::string& pattern, const std::vector<std::string>& names,
                               const std::string& option);

}  // namespace z2f::synth
