// The run summary for pipelines (--summary-json FILE): what was converted, the files, the
// counters and timings, or the errors. Written by rank 0 at the end of every run.
//
// {"status": "ok"|"error", "exit_code": N, "errors": [{"rank", "message"}...],
//  "complete_files_on_error": [...], "version", "checkpoint", "tag", "zero_stage",
//  "world_size", "ds_version", "ranks", parallel checkpoints only: "parallel": {"kind", "tp",
//  "pp", "ep", "dp", "zero"}, "options": {...}, "tensors", "files": [{"name",
//  "size", "skipped", "check" (--verify: intact, differs, truncated, too long, missing)}...],
//  "index", "output_bytes", "bytes_read", "bytes_written",
//  "wall_seconds", "gb_per_s", "peak_rss_bytes", "peak_open_inputs",
//  "io_wait_seconds": {"reads", "writes"} (--io direct: the longest any rank waited on its
//  direct reader, cold inputs only, and on its writer; 0 for the other backends),
//  "phase_seconds": {...}}
#pragma once

#include <string>

#include "cli/command_line.hpp"
#include "cli/exit_code.hpp"
#include "zero2fp32/result.hpp"

namespace z2f::cli {

// `error` is null on success; `result` is the run's (or the error's partial) result.
std::string summary_json(const ConvertRequest& request, const ConversionResult& result,
                         const ConversionError* error, ExitCode code);

// The summary of a run that ended before a conversion began (a usage error): the status, the
// code and the message, with the other fields empty.
std::string error_summary_json(const std::string& message, ExitCode code);

}  // namespace z2f::cli
