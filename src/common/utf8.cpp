#include "common/utf8.hpp"

namespace z2f {
namespace {

bool is_continuation(unsigned char byte) noexcept {
    return (byte & 0xC0u) == 0x80u;
}

}  // namespace

// Decodes the sequence at text[pos] following RFC 3629 (shortest form only, at most U+10FFFF).
// With Surrogates::kAllow, ED A0..BF xx (U+D800..U+DFFF) is accepted too.
Utf8Char decode_utf8_at(std::string_view text, std::size_t pos, Surrogates surrogates) noexcept {
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
        } else if (lead == 0xEDu && surrogates == Surrogates::kRefuse) {
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

bool is_valid_utf8(std::string_view text, Surrogates surrogates) noexcept {
    std::size_t pos = 0;
    while (pos < text.size()) {
        if (static_cast<unsigned char>(text[pos]) < 0x80u) {
            ++pos;  // the common case, kept out of the decoder
            continue;
        }
        const Utf8Char c = decode_utf8_at(text, pos, surrogates);
        if (c.length == 0)
            return false;
        pos += c.length;
    }
    return true;
}

}  // namespace z2f
