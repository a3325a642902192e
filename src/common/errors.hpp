// Throwing the library's Error (zero2fp32/error.hpp) with messages of one shape.
#pragma once

#include <string_view>

#include "zero2fp32/error.hpp"

namespace z2f {

// "<file>: <what>" for malformed input. `file` may be empty when no file is involved.
[[noreturn]] void throw_input_error(std::string_view file, std::string_view what);
[[noreturn]] void throw_unsupported(std::string_view file, std::string_view what);
[[noreturn]] void throw_usage_error(std::string_view what);
[[noreturn]] void throw_output_error(std::string_view what);
[[noreturn]] void throw_internal_error(std::string_view what);
// "<what> '<path>': <strerror(errnum)>".
[[noreturn]] void throw_io_error(std::string_view what, std::string_view path, int errnum);

}  // namespace z2f
