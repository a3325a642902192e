#include "common/byte_size.hpp"

#include <cstdio>

namespace z2f {

std::string format_byte_size(std::uint64_t bytes) {
    char text[32];
    double value = static_cast<double>(bytes);
    if (value >= 1e12)
        std::snprintf(text, sizeof text, "%.2f TB", value / 1e12);
    else if (value >= 1e9)
        std::snprintf(text, sizeof text, "%.2f GB", value / 1e9);
    else if (value >= 1e6)
        std::snprintf(text, sizeof text, "%.1f MB", value / 1e6);
    else if (value >= 1e3)
        std::snprintf(text, sizeof text, "%.1f kB", value / 1e3);
    else
        std::snprintf(text, sizeof text, "%llu B", static_cast<unsigned long long>(bytes));
    return text;
}

std::string format_duration(double seconds) {
    char text[32];
    if (seconds < 60) {
        std::snprintf(text, sizeof text, "%.1fs", seconds);
    } else {
        auto whole = static_cast<long long>(seconds);
        std::snprintf(text, sizeof text, "%lld:%02lld:%02lld", whole / 3600, whole / 60 % 60,
                      whole % 60);
    }
    return text;
}

}  // namespace z2f
