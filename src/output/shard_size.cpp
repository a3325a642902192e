#include "output/shard_size.hpp"

#include <array>
#include <charconv>
#include <string>
#include <system_error>

#include "common/errors.hpp"

namespace z2f::output {
namespace {

constexpr std::string_view kAccepted =
    "use a number with one of the decimal units KB, MB, GB, TB (1GB = 10^9 bytes; binary units "
    "such as GiB are not accepted), a plain number of bytes, or 'none'";

bool is_space(char c) noexcept {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
bool is_digit(char c) noexcept {
    return c >= '0' && c <= '9';
}
char to_upper(char c) noexcept {
    return c >= 'a' && c <= 'z' ? static_cast<char>(c - 32) : c;
}

std::string_view strip(std::string_view text) noexcept {
    while (!text.empty() && is_space(text.front())) {
        text.remove_prefix(1);
    }
    while (!text.empty() && is_space(text.back())) {
        text.remove_suffix(1);
    }
    return text;
}

[[noreturn]] void reject(std::string_view text, std::string_view why) {
    std::string message = "invalid --max_shard_size '";
    message += text;
    message += "': ";
    message += why;
    message += "; ";
    message += kAccepted;
    throw_usage_error(message);
}

// Reads a run of digits where single '_' may separate digits (Python's PEP 515 rule), appending
// the digits to `out`. Returns false on a misplaced '_'. An empty run is allowed here.
bool take_digits(std::string_view& rest, std::string& out) {
    bool last_was_digit = false;
    while (!rest.empty()) {
        const char c = rest.front();
        if (is_digit(c)) {
            out += c;
            last_was_digit = true;
        } else if (c == '_') {
            if (!last_was_digit || rest.size() < 2 || !is_digit(rest[1])) {
                return false;
            }
            last_was_digit = false;
        } else {
            break;
        }
        rest.remove_prefix(1);
    }
    return true;
}

// Python float() syntax for finite decimal literals: [sign] (digits [. [digits]] | . digits)
// [(e|E) [sign] digits]. Returns the literal without '_' and without a leading '+', or nothing.
std::optional<std::string> normalize_float_literal(std::string_view rest) {
    std::string out;
    if (!rest.empty() && (rest.front() == '+' || rest.front() == '-')) {
        if (rest.front() == '-') {
            out += '-';
        }
        rest.remove_prefix(1);
    }
    const std::size_t before = out.size();
    if (!take_digits(rest, out)) {
        return std::nullopt;
    }
    std::size_t mantissa_digits = out.size() - before;
    if (!rest.empty() && rest.front() == '.') {
        out += '.';
        rest.remove_prefix(1);
        const std::size_t at = out.size();
        if (!rest.empty() && rest.front() == '_') {
            return std::nullopt;  // "1._5" is not a Python float
        }
        if (!take_digits(rest, out)) {
            return std::nullopt;
        }
        mantissa_digits += out.size() - at;
    }
    if (mantissa_digits == 0) {
        return std::nullopt;
    }
    if (!rest.empty() && (rest.front() == 'e' || rest.front() == 'E')) {
        out += 'e';
        rest.remove_prefix(1);
        if (!rest.empty() && (rest.front() == '+' || rest.front() == '-')) {
            out += rest.front();
            rest.remove_prefix(1);
        }
        const std::size_t at = out.size();
        if (rest.empty() || !is_digit(rest.front()) || !take_digits(rest, out) ||
            out.size() == at) {
            return std::nullopt;
        }
    }
    if (!rest.empty()) {
        return std::nullopt;
    }
    return out;
}

}  // namespace

std::optional<std::uint64_t> parse_max_shard_size(std::string_view text) {
    const std::string_view value = strip(text);
    if (value.empty()) {
        reject(text, "the value is empty");
    }
    if (value.size() == 4 && to_upper(value[0]) == 'N' && to_upper(value[1]) == 'O' &&
        to_upper(value[2]) == 'N' && to_upper(value[3]) == 'E') {
        return std::nullopt;
    }

    // A plain byte count.
    bool all_digits = true;
    for (char c : value) {
        all_digits = all_digits && is_digit(c);
    }
    if (all_digits) {
        std::uint64_t bytes = 0;
        const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), bytes);
        if (ec != std::errc() || end != value.data() + value.size()) {
            reject(text, "the byte count does not fit in 64 bits");
        }
        return bytes;
    }

    // <number><unit>: the unit is the last two characters, as in huggingface_hub.
    const std::size_t unit_length = value.size() < 2 ? value.size() : 2;
    std::string unit;
    for (char c : value.substr(value.size() - unit_length)) {
        unit += to_upper(c);
    }
    static constexpr std::array<std::pair<std::string_view, double>, 4> kUnits{{
        {"KB", 1e3},
        {"MB", 1e6},
        {"GB", 1e9},
        {"TB", 1e12},
    }};
    double multiplier = 0.0;
    for (const auto& [name, factor] : kUnits) {
        if (unit == name) {
            multiplier = factor;
        }
    }
    if (multiplier == 0.0) {
        reject(text, "unit '" + unit + "' is not supported");
    }

    const std::string_view number = strip(value.substr(0, value.size() - unit_length));
    const std::optional<std::string> literal = normalize_float_literal(number);
    if (!literal) {
        reject(text, "'" + std::string(number) + "' is not a number");
    }
    double parsed = 0.0;
    const char* first = literal->data();
    const char* last = first + literal->size();
    const auto [end, ec] = std::from_chars(first, last, parsed);
    if (ec != std::errc() || end != last) {
        reject(text, "the number is out of range");
    }
    const double bytes = parsed * multiplier;
    if (bytes < 0.0) {
        reject(text, "the size is negative");
    }
    if (!(bytes < 18446744073709551616.0)) {  // 2^64; also catches infinity
        reject(text, "the size does not fit in 64 bits");
    }
    return static_cast<std::uint64_t>(bytes);  // truncation toward zero, like Python's int()
}

}  // namespace z2f::output
