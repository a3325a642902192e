// The command line of zero2fp32-mpi (Boost.Program_options), as a pure function: argv in,
// a conversion request (the library's Options plus what only the command line decides: paths,
// progress display, verbosity, summary file) or a help/version request out, or a usage error
// with a one-line message.
// Every argument of DeepSpeed's zero_to_fp32.py is accepted unchanged (--max_shard_size,
// --safe_serialization, -t/--tag, --exclude_frozen_parameters, -d/--debug).
#pragma once

#include <cstdint>
#include <string>
#include <variant>

#include "zero2fp32/options.hpp"

namespace z2f::cli {

enum class ProgressMode : std::uint8_t { kAuto, kAlways, kNever };

struct ConvertRequest {
    std::string checkpoint_dir;
    std::string output_dir;
    Options options;
    ProgressMode progress = ProgressMode::kAuto;
    int verbosity = 0;         // -1 quiet, 0 normal, 1 verbose (-v), 2 debug (-d)
    std::string summary_json;  // empty: none
};

struct HelpRequest {
    std::string text;
};
struct VersionRequest {};

using CommandLine = std::variant<ConvertRequest, HelpRequest, VersionRequest>;

// Throws Error(kUsage) on bad arguments and contradictions.
CommandLine parse_command_line(int argc, const char* const* argv);

// "16MiB" -> 16777216: a size as common/byte_size.hpp reads it, 64KiB to 16GiB.
std::uint64_t parse_buffer_size(const std::string& text);
// "4MiB" -> 4194304: a multiple of 4KiB from 4KiB to 1GiB.
std::uint64_t parse_block_size(const std::string& text);

// The --summary-json path of a command line that may not parse (so that a usage error is
// reported there too); empty when there is none.
std::string find_summary_path(int argc, const char* const* argv) noexcept;

}  // namespace z2f::cli

namespace z2f {

template <>
struct EnumNames<cli::ProgressMode> {
    static constexpr std::array<std::pair<cli::ProgressMode, std::string_view>, 3> kTable{{
        {cli::ProgressMode::kAuto, "auto"},
        {cli::ProgressMode::kAlways, "always"},
        {cli::ProgressMode::kNever, "never"},
    }};
};

}  // namespace z2f
