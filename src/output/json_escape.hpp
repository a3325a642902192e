// JSON string literals written byte for byte as the two reference writers of our output files
// write them. Our JSON is produced by hand, not by nlohmann-json, because golden tests compare
// whole files with what the Python and Rust tools emit.
//
// serde_json (the Rust `safetensors` writer, compact form):
// - `"` -> \"   `\` -> \\   U+0008 -> \b   U+0009 -> \t   U+000A -> \n   U+000C -> \f
//   U+000D -> \r   other U+0000..U+001F -> \u00XX with lowercase hex digits;
// - everything else, U+007F and all non-ASCII included, is copied as raw UTF-8;
// - `/` is not escaped. Rust strings are always valid UTF-8, so invalid input is an error.
//
// Python `json.dumps(..., ensure_ascii=True)` (the index files):
// - `"` `\` and U+0008/09/0A/0C/0D as above;
// - every other code point outside U+0020..U+007E (controls, U+007F, all non-ASCII) -> \uXXXX
//   with four lowercase hex digits; code points above U+FFFF -> a UTF-16 surrogate pair
//   \udXXX\udXXX;
// - Python strings may hold lone surrogates (pickle decodes with 'surrogatepass'); they arrive
//   here as 3-byte sequences ED A0..BF xx and are written as \udXXX like Python does.
//
// In both, sorting keys by UTF-8 bytes equals sorting them by code points (Python's string
// order), lone surrogates included, so callers sort std::string_views directly.
#pragma once

#include <string>
#include <string_view>

namespace z2f::output {

// Appends `"text"` escaped as serde_json does. Throws an input error naming the string (with
// its bytes shown as \xNN) when it is not valid UTF-8; `what` says what the string is, e.g.
// "tensor name".
void append_json_string_serde(std::string& out, std::string_view text, std::string_view what);

// Appends `"text"` escaped as Python json.dumps(ensure_ascii=True) does. Accepts valid UTF-8
// plus encoded lone surrogates; anything else is an input error as above.
void append_json_string_python(std::string& out, std::string_view text, std::string_view what);

// `text` with every byte outside printable ASCII shown as \xNN, for error messages.
std::string printable_bytes(std::string_view text);

}  // namespace z2f::output
