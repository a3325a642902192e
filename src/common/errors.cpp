#include "common/errors.hpp"

#include <cstring>
#include <string>

namespace z2f {
namespace {

std::string with_file(std::string_view file, std::string_view what) {
    if (file.empty()) {
        return std::string(what);
    }
    std::string message(file);
    message += ": ";
    message += what;
    return message;
}

}  // namespace

void throw_input_error(std::string_view file, std::string_view what) {
    throw Error(ErrorKind::kInput, with_file(file, what));
}

void throw_unsupported(std::string_view file, std::string_view what) {
    throw Error(ErrorKind::kUnsupported, with_file(file, what));
}

void throw_usage_error(std::string_view what) {
    throw Error(ErrorKind::kUsage, std::string(what));
}

void throw_output_error(std::string_view what) {
    throw Error(ErrorKind::kOutput, std::string(what));
}

void throw_internal_error(std::string_view what) {
    throw Error(ErrorKind::kInternal, "internal error: " + std::string(what));
}

void throw_io_error(std::string_view what, std::string_view path, int errnum) {
    std::string message(what);
    message += " '";
    message += path;
    message += "': ";
    message += std::strerror(errnum);
    throw Error(ErrorKind::kIo, std::move(message));
}

}  // namespace z2f
