// The verify phase, collective: every rank re-reads the files of its tasks and compares every
// byte with what the checkpoint gives (executor.hpp, verify_tasks); rank 0 also compares the
// index. Any mismatch fails the run with one line per difference.
#pragma once

#include <string>

#include "driver/phase_runner.hpp"
#include "run/run_plan.hpp"

namespace z2f::driver {

// True when every byte matched (agreed by every rank).
bool verify_outputs(PhaseRunner& phases, const run::RunPlan& plan, const std::string& output_dir,
                    const Options& options);

// Whether OUT_DIR already holds every planned file with its planned size, and the index:
// a finished conversion that --verify alone then only checks.
bool outputs_present(const run::RunPlan& plan, const std::string& output_dir);

}  // namespace z2f::driver
