// The inspect and prepare phases, collective; nothing is written before they pass.
//
//   inspect   rank 0 looks at OUT_DIR (destination/inspection.hpp): conflicts, stale shards,
//             the resume manifest, free space. The decision (which files are complete) is
//             broadcast and applied to the plan on every rank. Under --dry-run nothing is refused:
//             the decision says what the run would do with each existing file.
//   prepare   rank 0 creates OUT_DIR, removes what --overwrite replaces, writes the manifest.
// (--verify never comes here: it only reads, verify_phase.hpp.)
#pragma once

#include <string>

#include "driver/destination/inspection.hpp"
#include "driver/phase_runner.hpp"
#include "run/run_plan.hpp"

namespace z2f::driver {

struct OutputPreparation {
    OutputDirDecision decision;  // rank 0 only
};

bool inspect_output(PhaseRunner& phases, run::RunPlan& plan, const std::string& output_dir,
                    const Options& options, OutputPreparation& preparation);

bool prepare_output(PhaseRunner& phases, const run::RunPlan& plan, const std::string& output_dir,
                    const Options& options, const OutputPreparation& preparation);

}  // namespace z2f::driver
