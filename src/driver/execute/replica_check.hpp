// The replicas check of parallel checkpoints (docs/parallel-checkpoints.md §3.1, §4): the
// copies of a TP-replicated parameter (--tp-replicated check, the default) and of a tied
// pipeline weight must be bit-equal. The copy engine writes the first copy of such a tensor
// (its pieces flattened, run/run_plan.hpp); this step compares the copies before anything is
// written, so a mismatch leaves OUT_DIR untouched.
//
// Cost: every copy of every checked tensor is read once more (the first one included), in
// chunks of half the I/O buffer, by one rank per tensor (largest first to the least-loaded
// rank). Replicated tensors are the small ones (norms, biases) plus tied embeddings, so this
// is a small fraction of the run's reads.
//
// A mismatch names the tensor, the two files whose copies differ, the largest element
// difference (in the source dtype's values) and where it is.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "driver/phase_runner.hpp"
#include "io/input_files.hpp"
#include "run/run_plan.hpp"

namespace z2f::driver {

// The tensors with copies to compare, and the rank that compares each (the same on every rank).
struct ReplicaCheck {
    std::uint32_t tensor = 0;  // index in plan.tensors.tensors
    std::uint32_t rank = 0;
    std::uint64_t bytes = 0;  // read to check it
};
std::vector<ReplicaCheck> plan_replica_checks(const run::RunPlan& plan, std::uint32_t ranks);

// Compares the copies of every tensor `rank` checks; one message per differing tensor.
std::vector<std::string> check_replicas_of(const run::RunPlan& plan, std::uint32_t rank,
                                           io::InputFiles& inputs, std::size_t buffer_size);

// The phase: every rank checks its share; false when some copies differ (or reading failed).
bool check_replicas(PhaseRunner& phases, const run::RunPlan& plan, const Options& options);

}  // namespace z2f::driver
