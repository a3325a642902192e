#include "common/byte_size.hpp"

#include <array>
#include <charconv>
#include <cstdio>
#include <optional>
#include <system_error>
#include <utility>

#include "common/errors.hpp"

namespace z2f {

const char* const kByteSizeUnits =
    "kB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024)";

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

std::string with_commas(std::uint64_t value) {
    std::string digits = std::to_string(value);
    for (auto at = static_cast<std::ptrdiff_t>(digits.size()) - 3; at > 0; at -= 3)
        digits.insert(static_cast<std::size_t>(at), ",");
    return digits;
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

namespace {

bool is_space(char c) noexcept {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
bool is_digit(char c) noexcept {
    return c >= '0' && c <= '9';
}
bool is_letter(char c) noexcept {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
char to_upper(char c) noexcept {
    return c >= 'a' && c <= 'z' ? static_cast<char>(c - 32) : c;
}

std::string_view strip(std::string_view text) noexcept {
    while (!text.empty() && is_space(text.front()))
        text.remove_prefix(1);
    while (!text.empty() && is_space(text.back()))
        text.remove_suffix(1);
    return text;
}

[[noreturn]] void reject(std::string_view text, std::string_view option, std::string_view why) {
    std::string message = "invalid ";
    message += option;
    message += " '";
    message += text;
    message += "': ";
    message += why;
    message += "; give a number with a unit: ";
    message += kByteSizeUnits;
    message += ", e.g. 5GB or 16MiB, or a plain number of bytes";
    throw_usage_error(message);
}

// A run of digits where single '_' may separate digits (Python's PEP 515 rule), appended to
// `out`. False on a misplaced '_'. An empty run is allowed here.
bool take_digits(std::string_view& rest, std::string& out) {
    bool last_was_digit = false;
    while (!rest.empty()) {
        const char c = rest.front();
        if (is_digit(c)) {
            out += c;
            last_was_digit = true;
        } else if (c == '_') {
            if (!last_was_digit || rest.size() < 2 || !is_digit(rest[1]))
                return false;
            last_was_digit = false;
        } else {
            break;
        }
        rest.remove_prefix(1);
    }
    return true;
}

// Python float() syntax for finite decimal literals: [sign] (digits [. [digits]] | . digits)
// [(e|E) [sign] digits]. The literal without '_' and without a leading '+', or nothing.
std::optional<std::string> normalize_float_literal(std::string_view rest) {
    std::string out;
    if (!rest.empty() && (rest.front() == '+' || rest.front() == '-')) {
        if (rest.front() == '-')
            out += '-';
        rest.remove_prefix(1);
    }
    const std::size_t before = out.size();
    if (!take_digits(rest, out))
        return std::nullopt;
    std::size_t mantissa_digits = out.size() - before;
    if (!rest.empty() && rest.front() == '.') {
        out += '.';
        rest.remove_prefix(1);
        const std::size_t at = out.size();
        if (!rest.empty() && rest.front() == '_')
            return std::nullopt;  // "1._5" is not a Python float
        if (!take_digits(rest, out))
            return std::nullopt;
        mantissa_digits += out.size() - at;
    }
    if (mantissa_digits == 0)
        return std::nullopt;
    if (!rest.empty() && (rest.front() == 'e' || rest.front() == 'E')) {
        out += 'e';
        rest.remove_prefix(1);
        if (!rest.empty() && (rest.front() == '+' || rest.front() == '-')) {
            out += rest.front();
            rest.remove_prefix(1);
        }
        const std::size_t at = out.size();
        if (rest.empty() || !is_digit(rest.front()) || !take_digits(rest, out) || out.size() == at)
            return std::nullopt;
    }
    if (!rest.empty())
        return std::nullopt;
    return out;
}

std::optional<double> unit_multiplier(std::string_view unit) {
    static constexpr std::array<std::pair<std::string_view, double>, 9> kUnits{{
        {"B", 1.0},
        {"KB", 1e3},
        {"MB", 1e6},
        {"GB", 1e9},
        {"TB", 1e12},
        {"KIB", 1024.0},
        {"MIB", 1024.0 * 1024},
        {"GIB", 1024.0 * 1024 * 1024},
        {"TIB", 1024.0 * 1024 * 1024 * 1024},
    }};
    std::string upper;
    for (char c : unit)
        upper += to_upper(c);
    for (const auto& [name, factor] : kUnits) {
        if (upper == name)
            return factor;
    }
    return std::nullopt;
}

}  // namespace

std::uint64_t parse_byte_size(std::string_view text, std::string_view option) {
    const std::string_view value = strip(text);
    if (value.empty())
        reject(text, option, "the value is empty");

    bool all_digits = true;
    for (char c : value)
        all_digits = all_digits && is_digit(c);
    if (all_digits) {
        std::uint64_t bytes = 0;
        const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), bytes);
        if (ec != std::errc() || end != value.data() + value.size())
            reject(text, option, "the byte count does not fit in 64 bits");
        return bytes;
    }

    // The unit is the trailing run of letters; an exponent's 'e' is always followed by digits,
    // so it never ends up in the unit.
    std::size_t unit_start = value.size();
    while (unit_start > 0 && is_letter(value[unit_start - 1]))
        --unit_start;
    const std::string_view unit = value.substr(unit_start);
    const std::string_view number = strip(value.substr(0, unit_start));
    if (number.empty())
        reject(text, option, "there is no number");
    // No unit: a byte count written as a float literal ("1e9").
    std::optional<double> multiplier = unit.empty() ? 1.0 : unit_multiplier(unit);
    if (!multiplier)
        reject(text, option, "unknown unit '" + std::string(unit) + "'");
    const std::optional<std::string> literal = normalize_float_literal(number);
    if (!literal)
        reject(text, option, "'" + std::string(number) + "' is not a number");
    double parsed = 0.0;
    const char* first = literal->data();
    const char* last = first + literal->size();
    const auto [end, ec] = std::from_chars(first, last, parsed);
    if (ec != std::errc() || end != last)
        reject(text, option, "the number is out of range");
    const double bytes = parsed * *multiplier;
    if (bytes < 0.0)
        reject(text, option, "the size is negative");
    if (!(bytes < 18446744073709551616.0))  // 2^64; also catches infinity and NaN
        reject(text, option, "the size does not fit in 64 bits");
    if (unit.empty() && bytes != static_cast<double>(static_cast<std::uint64_t>(bytes)))
        reject(text, option, "a byte count without a unit must be a whole number");
    return static_cast<std::uint64_t>(bytes);  // truncation toward zero, like Python's int()
}

}  // namespace z2f
