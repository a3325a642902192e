#include "output/json_escape.hpp"

#include <cstdint>

#include "common/errors.hpp"
#include "common/utf8.hpp"

namespace z2f::output {
namespace {

constexpr char kHex[] = "0123456789abcdef";

void append_u_escape(std::string& out, char32_t unit) {
    out += "\\u";
    out += kHex[(unit >> 12) & 0xFu];
    out += kHex[(unit >> 8) & 0xFu];
    out += kHex[(unit >> 4) & 0xFu];
    out += kHex[unit & 0xFu];
}

// The short escapes both writers share; returns 0 for characters without one.
char short_escape(unsigned char c) noexcept {
    switch (c) {
        case '"':
            return '"';
        case '\\':
            return '\\';
        case 0x08:
            return 'b';
        case 0x09:
            return 't';
        case 0x0A:
            return 'n';
        case 0x0C:
            return 'f';
        case 0x0D:
            return 'r';
        default:
            return 0;
    }
}

[[noreturn]] void throw_bad_utf8(std::string_view text, std::string_view what) {
    std::string message(what);
    message += " \"";
    message += printable_bytes(text);
    message += "\" is not valid UTF-8";
    throw_input_error("", message);
}

}  // namespace

void append_json_string_serde(std::string& out, std::string_view text, std::string_view what) {
    if (!is_valid_utf8(text, Surrogates::kRefuse)) {
        throw_bad_utf8(text, what);
    }
    out += '"';
    std::size_t run_start = 0;  // bytes copied as they are: printable ASCII, U+007F, non-ASCII
    for (std::size_t i = 0; i < text.size(); ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c >= 0x20u && c != '"' && c != '\\') {
            continue;
        }
        out.append(text.substr(run_start, i - run_start));
        run_start = i + 1;
        if (const char e = short_escape(c); e != 0) {
            out += '\\';
            out += e;
        } else {
            append_u_escape(out, c);
        }
    }
    out.append(text.substr(run_start));
    out += '"';
}

void append_json_string_python(std::string& out, std::string_view text, std::string_view what) {
    std::string escaped = "\"";
    std::size_t pos = 0;
    while (pos < text.size()) {
        const Utf8Char d = decode_utf8_at(text, pos, Surrogates::kAllow);
        if (d.length == 0) {
            throw_bad_utf8(text, what);
        }
        pos += d.length;
        const char32_t cp = d.code_point;
        if (cp < 0x80u) {
            const auto c = static_cast<unsigned char>(cp);
            if (const char e = short_escape(c); e != 0) {
                escaped += '\\';
                escaped += e;
            } else if (c < 0x20u || c == 0x7Fu) {
                append_u_escape(escaped, cp);
            } else {
                escaped += static_cast<char>(c);
            }
        } else if (cp < 0x10000u) {
            append_u_escape(escaped, cp);
        } else {
            const char32_t v = cp - 0x10000u;
            append_u_escape(escaped, 0xD800u + (v >> 10));
            append_u_escape(escaped, 0xDC00u + (v & 0x3FFu));
        }
    }
    escaped += '"';
    out += escaped;
}

std::string printable_bytes(std::string_view text) {
    std::string shown;
    shown.reserve(text.size());
    for (char ch : text) {
        const auto c = static_cast<unsigned char>(ch);
        if (c >= 0x20u && c < 0x7Fu && c != '\\') {
            shown += ch;
        } else {
            shown += "\\x";
            shown += kHex[c >> 4];
            shown += kHex[c & 0xFu];
        }
    }
    return shown;
}

}  // namespace z2f::output
