// --verify, collective and read-only: it never creates, renames or removes a file. Its options
// come from OUT_DIR's run record (destination/record_phase.hpp).
//
//   verify   (after planning from those options) rank 0 finds each planned file missing, of
//            the wrong size, or present; every rank compares the present files' tasks it owns
//            with the checkpoint (execute/direct_executor.hpp, verify_tasks), and rank 0 the index.
//            The findings are gathered on rank 0, which reports each file as intact, differs
//            (naming the tensors), truncated, too long or missing, and fails the run when any
//            file is not intact.
#pragma once

#include <string>
#include <vector>

#include "driver/destination/record_phase.hpp"
#include "driver/phase_runner.hpp"
#include "run/run_plan.hpp"

namespace z2f::driver {

// `checks` gets one word per planned file on rank 0 (FileReport::check). True when every file
// and the index are intact (agreed by every rank).
bool verify_outputs(PhaseRunner& phases, run::RunPlan& plan, const std::string& output_dir,
                    const Options& options, const RecordedRun& recorded,
                    std::vector<std::string>& checks);

}  // namespace z2f::driver
