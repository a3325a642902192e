// UTF-8 as RFC 3629 defines it (shortest form only, at most U+10FFFF), with one choice: whether
// encoded surrogates (ED A0..BF xx, U+D800..U+DFFF) are accepted. Python's pickle decodes
// strings with 'surrogatepass' (accept); JSON output must refuse them.
#pragma once

#include <cstddef>
#include <string_view>

namespace z2f {

enum class Surrogates : unsigned char { kRefuse, kAllow };

// One decoded code point and the bytes it took; length 0 means the bytes at `pos` are invalid.
struct Utf8Char {
    char32_t code_point = 0;
    std::size_t length = 0;
};

// Decodes the sequence starting at text[pos] (pos < text.size()).
Utf8Char decode_utf8_at(std::string_view text, std::size_t pos, Surrogates surrogates) noexcept;

bool is_valid_utf8(std::string_view text, Surrogates surrogates) noexcept;

}  // namespace z2f
