// --verify, collective and read-only: it never creates, renames or removes a file.
//
//   record   (before discovery) rank 0 reads OUT_DIR's run record (run_manifest.hpp). The
//            output-shaping options and the tag it holds become the run's options on every
//            rank (broadcast); an option the caller chose that contradicts it, an -t naming
//            another tag, or --overwrite/--resume with --verify, are usage errors. No record:
//            an error that says so (what the files should hold is then unknown).
//   verify   (after planning from those options) rank 0 finds each planned file missing, of
//            the wrong size, or present; every rank compares the present files' tasks it owns
//            with the checkpoint (executor.hpp, verify_tasks), and rank 0 the index. The
//            findings are gathered on rank 0, which reports each file as intact, differs
//            (naming the tensors), truncated, too long or missing, and fails the run when any
//            file is not intact.
#pragma once

#include <string>
#include <vector>

#include "driver/phase_runner.hpp"
#include "run/run_plan.hpp"

namespace z2f::driver {

struct RecordedRun {  // rank 0 only
    std::string tag_dir;
    bool complete = false;
};

// Replaces the shaping options and the tag in `options` with the record's, on every rank.
bool read_run_record(PhaseRunner& phases, const std::string& checkpoint_dir,
                     const std::string& output_dir, Options& options, RecordedRun& recorded);

// `checks` gets one word per planned file on rank 0 (FileReport::check). True when every file
// and the index are intact (agreed by every rank).
bool verify_outputs(PhaseRunner& phases, run::RunPlan& plan, const std::string& output_dir,
                    const Options& options, const RecordedRun& recorded,
                    std::vector<std::string>& checks);

}  // namespace z2f::driver
