// The universal branch of build_run_plan: DeepSpeed's universal checkpoint of a data-parallel
// ZeRO checkpoint, or of a tensor- or pipeline-parallel one with ZeRO-1/2 or BF16_Optimizer
// partitions (docs/universal-checkpoint.md), as RunPlan files, tensors and tasks that the
// ordinary execute, replica check, finish and verify phases run unchanged. Each file's layout stays
// the one description of its bytes:
//
//   tensor files      fp32.pt, exp_avg.pt, exp_avg_sq.pt: universal_layout's layout (fixed
//                     regions, one slot holding the tensor, the zip tail from the slot's CRC)
//   known files       step.pt, optimizer_state.pt: one fixed region, the whole file
//   byte copies       the model-states files: slots and no fixed region, each slot a piece of
//                     the input file planned as a "tensor" of kU8 elements with one extent and
//                     no conversion, so that the copy engine copies it like any tensor;
//                     RunPlan::copied_pieces counts them
//   latest_universal  the plan's index: rank 0 writes it after every rank succeeded and every
//                     file is visible, so it never names a partial folder; verified like an index
//
// Every file lies under RunPlan::output_folder, "<tag>_universal".
//
// Ownership (plan/unit_ownership.hpp): each rank owns a set of parameters, balanced by bytes: a
// parameter's files are one unit (one rank reads its three streams and writes its files);
// optimizer_state.pt is one; a byte copy is cut into at most `ranks` pieces of at least 64 MiB,
// each a unit of its own, so that a large ZeRO-1/2 model-states file is shared by several ranks
// like a large Hugging Face shard (its lead renames it once every rank agreed).
#pragma once

#include "run/run_plan.hpp"

namespace z2f::run {

// Usage errors for the options that do not apply to universal output (validate_options calls
// it when the format is universal).
void validate_universal_options(const Options& options);

// Fills run.tensors, files, tasks, index, output_folder, copied_pieces, warnings and notes from
// the universal plan the source made (run/tensor_source.hpp: plan_universal, or
// plan_parallel_universal for tensor- and pipeline-parallel checkpoints).
void plan_universal_run(const UniversalSource& source, const RunSettings& settings, RunPlan& run);

}  // namespace z2f::run
