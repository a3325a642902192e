// The TensorSource of an AutoEP checkpoint (plan/autoep_plan.hpp) and the grid --dry-run shows
// for it: every file with its place (data-parallel rank, expert-parallel rank and its rank among
// those sharing the experts). ZeRO-3 partition-native AutoEP checkpoints come through the
// data-parallel reader (their names are those of a plain ZeRO-3 folder), ZeRO-1/2 ones through the
// parallel reader (their expert files). Pure.
#pragma once

#include "checkpoint/checkpoint_meta.hpp"
#include "checkpoint/parallel_meta.hpp"
#include "run/tensor_source.hpp"

namespace z2f::run {

// ZeRO-3: the whole source (tensors, grid, notes), or universal output's metadata only.
TensorSource autoep_zero3_source(const checkpoint::CheckpointMeta& meta, const Options& options);

// The grids; the ZeRO-1/2 one completes describe_grid's with each optimizer file's expert place.
ConversionPlan::ParallelGrid describe_autoep_grid(const checkpoint::CheckpointMeta& meta);
void describe_autoep_places(const checkpoint::ParallelCheckpointMeta& meta,
                            ConversionPlan::ParallelGrid& grid);

}  // namespace z2f::run
