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

void write_index(const PhaseRunner& phases, const run::RunPlan& plan, const std::string& output_dir,
                 const Options& options);

}  // namespace z2f::driver
