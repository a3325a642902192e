#include "synth/name_pattern.hpp"

#include <regex>

#include "common/errors.hpp"

namespace z2f::synth {

std::vector<bool> search_names(const std::string& pattern, const std::vector<std::string>& names,
                               const std::string& option) {
    std::regex compiled;
    try {
        compiled = std::regex(pattern);
    } catch (const std::regex_error& error) {
        throw_usage_error(option + ": invalid regular expression '" + pattern +
                          "': " + error.what());
    }
    std::vector<bool> matches;
    matches.reserve(names.size());
    for (const std::string& name : names) {
        matches.push_back(std::regex_search(name, compiled));
    }
    return matches;
}

}  // namespace z2f::synth
