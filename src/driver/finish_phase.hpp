// The index phase, on rank 0 after every rank succeeded: check that every output file is
// visible with its planned size (an OUT_DIR that is not shared between nodes shows here), fsync
// the folders holding them, write the index (temp + fsync + rename; latest_universal for
// universal output), copy the Hugging Face side files, and mark the run manifest complete (it is
// kept). A file that already holds what would be written is left untouched.
#pragma once

#include <string>

#include "driver/phase_runner.hpp"
#include "run/run_plan.hpp"

namespace z2f::driver {

// How far the phase got on rank 0, for a truthful last word when it fails half-way.
struct IndexOutcome {
    bool index_written = false;    // the index (or latest_universal), if the plan has one
    bool record_complete = false;  // the run record says "complete"
};

void write_index(const PhaseRunner& phases, const run::RunPlan& plan, const std::string& output_dir,
                 const Options& options, IndexOutcome& outcome);

}  // namespace z2f::driver
