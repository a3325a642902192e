#include "checkpoint/natural_sort.hpp"

#include <vector>

namespace z2f::checkpoint {
namespace {

bool is_digit(char c) noexcept {
    return c >= '0' && c <= '9';
}

// Python's re.split(r'(\d+)', name): text, digits, text, digits, ..., text (text may be "").
std::vector<std::string_view> split_runs(std::string_view name) {
    std::vector<std::string_view> runs;
    std::size_t pos = 0;
    bool digits = false;
    while (true) {
        std::size_t end = pos;
        while (end < name.size() && is_digit(name[end]) == digits) {
            ++end;
        }
        runs.push_back(name.substr(pos, end - pos));
        if (end == name.size()) {
            return runs;  // always ends with a text run, possibly empty
        }
        pos = end;
        digits = !digits;
    }
}

// Compares two digit runs by numeric value, without any length limit.
int compare_numbers(std::string_view a, std::string_view b) noexcept {
    while (a.size() > 1 && a.front() == '0')
        a.remove_prefix(1);
    while (b.size() > 1 && b.front() == '0')
        b.remove_prefix(1);
    if (a.size() != b.size()) {
        return a.size() < b.size() ? -1 : 1;
    }
    return a.compare(b);
}

}  // namespace

bool natural_less(std::string_view a, std::string_view b) noexcept {
    std::vector<std::string_view> ra = split_runs(a);
    std::vector<std::string_view> rb = split_runs(b);
    std::size_t n = std::min(ra.size(), rb.size());
    for (std::size_t i = 0; i < n; ++i) {
        // Even runs are text (compared by code point: byte order of UTF-8), odd runs numbers.
        int c = i % 2 == 0 ? ra[i].compare(rb[i]) : compare_numbers(ra[i], rb[i]);
        if (c != 0) {
            return c < 0;
        }
    }
    return ra.size() < rb.size();
}

}  // namespace z2f::checkpoint
