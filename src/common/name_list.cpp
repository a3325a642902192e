#include "common/name_list.hpp"

#include <algorithm>

#include "common/byte_size.hpp"

namespace z2f {

std::string listed_names(const std::vector<std::string>& names, std::size_t shown) {
    const std::size_t listed = shown == 0 ? names.size() : std::min(shown, names.size());
    std::string text;
    for (std::size_t i = 0; i < listed; ++i)
        text += (i == 0 ? "" : ", ") + names[i];
    if (listed < names.size())
        text += " and " + with_commas(names.size() - listed) + " more";
    return text;
}

}  // namespace z2f
