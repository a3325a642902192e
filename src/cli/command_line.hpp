// The command line of zero2fp32-mpi (Boost.Program_options), as a pure function: argv in,
// ConvertOptions or a help/version request out, or a usage error with a one-line message.
// Every argument of DeepSpeed's zero_to_fp32.py is accepted unchanged (--max_shard_size,
// --safe_serialization, -t/--tag, --exclude_frozen_parameters, -d/--debug).
#pragma once

#include <string>
#include <variant>

#include "zero2fp32/options.hpp"

namespace z2f::cli {

struct HelpRequest {
    std::string text;
};
struct VersionRequest {};

using CommandLine = std::variant<ConvertOptions, HelpRequest, VersionRequest>;

// Throws Error(kUsage) on bad arguments and contradictions.
CommandLine parse_command_line(int argc, const char* const* argv);

// "16MiB" -> 16777216; KiB, MiB, GiB or plain bytes.
std::uint64_t parse_buffer_size(const std::string& text);

}  // namespace z2f::cli
