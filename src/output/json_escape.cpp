#include "output/json_escape.hpp"

#include <cstdint>

#include "zero2fp32/error.hpp"

namespace z2f::output {
namespace {

constexpr char kHex[] = "0123456789abcdef";

// One decoded code point: its value and how many bytes it took; length 0 means invalid.
struct Decoded {
    char32_t code_point = 0;
    std::size_t length = 0;
};

bool is_continuation(unsigned char byte) noexcept {
    return (byte & 0xC0u) == 0x80u;
}

// Decodes the sequence at text[pos] following RFC 3629 (shortest form only, at most U+10FFFF).
// With `allow_surrogates`, ED A0..BF xx (U+D800..U+DFFF) is accepted too.
Decoded decode_at(std::string_view text, std::size_t pos, bool allow_surrogates) noexcept {
    const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[pos + i]); };
    const std::size_t left = text.size() - pos;
    const unsigned char lead = byte(0);
    if (lead < 0x80u) {
        return {lead, 1};
    }
    std::size_t length = 0;
    char32_t value = 0;
    unsigned char min_second = 0x80u;
    unsigned char max_second = 0xBFu;
    if (lead >= 0xC2u && lead <= 0xDFu) {
        length = 2;
        value = lead & 0x1Fu;
    } else if (lead >= 0xE0u && lead <= 0xEFu) {
        length = 3;
        value = lead & 0x0Fu;
        if (lead == 0xE0u) {
            min_second = 0xA0u;  // shorter forms are overlong
        } else if (lead == 0xEDu && !allow_surrogates) {
            max_second = 0x9Fu;  // ED A0.. encodes U+D800..U+DFFF
        }
    } else if (lead >= 0xF0u && lead <= 0xF4u) {
        length = 4;
        value = lead & 0x07u;
        if (lead == 0xF0u) {
            min_second = 0x90u;
        } else if (lead == 0xF4u) {
            max_second = 0x8Fu;  // above U+10FFFF otherwise
        }
    } else {
        return {};
    }
    if (left < length || byte(1) < min_second || byte(1) > max_second) {
        return {};
    }
    for (std::size_t i = 1; i < length; ++i) {
        if (!is_continuation(byte(i))) {
            return {};
        }
        value = (value << 6) | (byte(i) & 0x3Fu);
    }
    return {value, length};
}

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

bool is_valid_utf8(std::string_view text) noexcept {
    std::size_t pos = 0;
    while (pos < text.size()) {
        if (static_cast<unsigned char>(text[pos]) < 0x80u) {
            ++pos;  // the common case, kept out of the decoder
            continue;
        }
        const Decoded d = decode_at(text, pos, false);
        if (d.length == 0) {
            return false;
        }
        pos += d.length;
    }
    return true;
}

void append_json_string_serde(std::string& out, std::string_view text, std::string_view what) {
    if (!is_valid_utf8(text)) {
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
        const Decoded d = decode_at(text, pos, true);
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
