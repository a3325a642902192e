// The execute and finalize phases, collective:
//
//   execute    every rank writes its tasks (execute/executor.hpp); a failing rank tells every other
//              rank at once (mpi/peer_channel), and every rank checks for such notices and
//              for termination signals after each buffer of I/O; rank 0 aggregates progress
//   finalize   the leads of files shared by several ranks append the CRC tails (from every
//              rank's slot CRCs) and rename them
//
// After a failure every rank removes its temp files; the files completed by then (on any rank)
// are returned so that the report can list them for --resume.
#pragma once

#include <cstdint>
#include <vector>

#include "driver/phase_runner.hpp"
#include "run/run_plan.hpp"

namespace z2f::driver {

struct ExecuteOutcome {
    bool ok = false;
    std::vector<std::uint32_t> completed;  // every file on disk under its final name
    std::uint64_t peak_open_inputs = 0;
};

ExecuteOutcome execute_and_finalize(PhaseRunner& phases, const run::RunPlan& plan,
                                    const std::string& output_dir, const Options& options);

}  // namespace z2f::driver
