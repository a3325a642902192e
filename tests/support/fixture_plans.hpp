// The bundled fixtures as the plan sees them, for tests that build RunPlans without MPI: a
// fixture's assembled metadata (read in this process) and the RunPlan of it at a rank count.
#pragma once

#include <cstdint>
#include <string>

#include "checkpoint/checkpoint_meta.hpp"
#include "run/run_plan.hpp"
#include "zero2fp32/options.hpp"

namespace z2f::testing {

// tests/data/deepspeed/<fixture>, discovered (its `latest` tag) and read.
checkpoint::CheckpointMeta fixture_meta(const std::string& fixture);

// build_run_plan(meta) for `ranks` ranks, writer version "test".
run::RunPlan build_plan(const checkpoint::CheckpointMeta& meta, std::uint32_t ranks,
                        const Options& options = {});

}  // namespace z2f::testing
