#include "python/arguments.hpp"

#include <variant>

#include "common/errors.hpp"

namespace z2f::python {

cli::ConvertRequest parse_arguments(const std::vector<std::string>& arguments) {
    std::vector<const char*> argv{"zero2fp32"};
    for (const std::string& argument : arguments)
        argv.push_back(argument.c_str());
    cli::CommandLine command = cli::parse_command_line(static_cast<int>(argv.size()), argv.data());
    auto* request = std::get_if<cli::ConvertRequest>(&command);
    if (request == nullptr)
        throw_usage_error("help and version are not options of the Python functions");
    return std::move(*request);
}

}  // namespace z2f::python
