// The grid a sequence-parallel checkpoint shows in --dry-run and the summary
// (checkpoint/sequence_parallel.hpp): SP x DP ranks, every file with its ZeRO rank, its
// sequence-parallel rank and its data-parallel rank. Read as a data-parallel checkpoint, it has
// no merge: every weight is whole on each sequence-parallel rank.
#pragma once

#include "checkpoint/checkpoint_meta.hpp"
#include "zero2fp32/plan.hpp"

namespace z2f::run {

ConversionPlan::ParallelGrid describe_sequence_parallel_grid(
    const checkpoint::CheckpointMeta& meta);

}  // namespace z2f::run
