// The output directory before writing: what is already there, what may be reused, what must
// not be overwritten silently. Run by rank 0 only, between planning and execution.
//
// `inspect_output_dir` only looks (so an error found here leaves OUT_DIR untouched):
//   - files with this run's output names (or its index) already present: an error listing them,
//     unless --overwrite (they will be replaced) or --resume (the manifest decides);
//   - other files this format's naming could produce (e.g. the shards of an earlier run with
//     another shard count), or any other file in the run's output folder (universal output,
//     destination/folders.hpp): stale outputs that would be mixed in; an error unless --overwrite;
//   - --resume: the run record must describe this run (same checkpoint, inputs and options;
//     the options came from the record itself, destination/record_phase.hpp): a record of another
//     run, an unreadable one, or output files without any record are refused as usage errors naming
//     what differs, since --resume never replaces another run's output (--overwrite does).
//     Files the record vouches for (same name, size and header) are kept as they are; every
//     other planned file is written again;
//   - free space (statvfs) for what remains to be written, unless --no-space-check.
// With `report_only` (--dry-run) it refuses nothing: the refusal the run would stop with is
// returned instead, with what the run would do with each existing file.
// `prepare_output_dir` then creates OUT_DIR and the folders of the planned files, removes what
// --overwrite replaces and the converter's own leftover temp files, and writes the run
// manifest; when every file is already complete (--resume of a finished output) it writes
// nothing at all.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "driver/destination/run_record.hpp"
#include "run/run_plan.hpp"
#include "zero2fp32/result.hpp"

namespace z2f::driver {

struct OutputDirPolicy {
    bool overwrite = false;
    bool resume = false;
    bool space_check = true;
    bool report_only = false;  // --dry-run: refuse nothing, say what would happen
    Options shape{};           // the run's options: a record's must have the same shaping ones
};

struct OutputDirDecision {
    std::vector<std::uint32_t> complete;  // planned files an earlier run finished (--resume)
    std::vector<std::string> replaced;    // existing names that --overwrite / --resume rewrites
    std::vector<std::string> stale;       // other output-like names removed under --overwrite
    bool directory_exists = false;
    bool index_current = false;          // the index on disk is the one this run writes
    std::vector<ExistingFile> existing;  // every existing output-like file, and its fate
    std::string refusal;      // report_only: why the run would stop (empty: it would not)
    std::string resume_note;  // --resume: why the run record vouches for nothing (empty: it does)
};

OutputDirDecision inspect_output_dir(const run::RunPlan& plan, const std::string& output_dir,
                                     const OutputDirPolicy& policy);
// After inspect_output_dir; `plan` has the decision applied (complete files skipped).
void prepare_output_dir(const run::RunPlan& plan, const std::string& output_dir,
                        const Options& options, const OutputDirDecision& decision);

// The run manifest of `plan` (state "writing" or "complete").
RunManifest manifest_of(const run::RunPlan& plan, const Options& options, bool complete);

// The temporary name a file is written under until it is complete.
std::string temp_path(const std::string& output_dir, const std::string& name);

// The temporary names (relative to OUT_DIR) of every file this run writes: its planned files,
// the index, the run record and the copied side files. Leftovers of a failed or killed run
// under these names are the converter's own, removed before a run writes (prepare_output_dir)
// and never taken for another run's outputs.
std::vector<std::string> run_temp_names(const run::RunPlan& plan);
void remove_leftover_temp_files(const run::RunPlan& plan, const std::string& output_dir);

// Whether `name` is one this format's writer could produce (any shard count, or the index).
bool is_output_like_name(OutputFormat format, const std::string& name);

}  // namespace z2f::driver
