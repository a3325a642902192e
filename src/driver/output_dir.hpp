// The output directory before writing: what is already there, what may be reused, what must
// not be overwritten silently. Run by rank 0 only, between planning and execution.
//
// `inspect_output_dir` only looks (so an error found here leaves OUT_DIR untouched):
//   - files with this run's output names (or its index) already present: an error listing them,
//     unless --overwrite (they will be replaced) or --resume (the manifest decides);
//   - other files this format's naming could produce (e.g. the shards of an earlier run with
//     another shard count), or any other file in the run's output folder (universal output,
//     output_folder.hpp): stale outputs that would be mixed in; an error unless --overwrite;
//   - --resume: files vouched for by the run manifest (same run, same name, size and header)
//     are skipped; every other existing output file is rewritten;
//   - free space (statvfs) for what remains to be written, unless --no-space-check.
// `prepare_output_dir` then creates OUT_DIR and the folders of the planned files, removes what
// --overwrite replaces and leftover temp files, and writes the run manifest.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "driver/run_manifest.hpp"
#include "run/run_plan.hpp"

namespace z2f::driver {

struct OutputDirPolicy {
    bool overwrite = false;
    bool resume = false;
    bool space_check = true;
};

struct OutputDirDecision {
    std::vector<std::uint32_t> complete;  // planned files an earlier run finished (--resume)
    std::vector<std::string> replaced;    // existing names that --overwrite / --resume rewrites
    std::vector<std::string> stale;       // other output-like names removed under --overwrite
    bool directory_exists = false;
};

OutputDirDecision inspect_output_dir(const run::RunPlan& plan, const std::string& output_dir,
                                     const OutputDirPolicy& policy);
// After inspect_output_dir; `plan` has the decision applied (complete files skipped).
void prepare_output_dir(const run::RunPlan& plan, const std::string& output_dir,
                        const OutputDirDecision& decision);

// The temporary name a file is written under until it is complete.
std::string temp_path(const std::string& output_dir, const std::string& name);

// Whether `name` is one this format's writer could produce (any shard count, or the index).
bool is_output_like_name(OutputFormat format, const std::string& name);

}  // namespace z2f::driver
