// From a FileGrid and the interpreted contents of its files to a cross-checked
// ParallelCheckpointMeta (docs/parallel-checkpoints.md §1, §7).
//
// Inputs are numbered: mp_rank model files (mp order), ZeRO optimizer files (mp, then dp order),
// layer files ((layer, tp) order), expert files ((layer, expert) order). expp_rank_* files are
// not inputs: under ZeRO they hold {'optimizer': None}, without it the experts' Adam state, and
// the weights are in the expert files either way.
//
// Checks made here (no tensor layout needed): the degrees recorded in the files
// (checkpoint_parallel_dimensions, mp_world_size) against the grid; one ZeRO layout and stage
// over every optimizer file; the same merge rules on every TP rank; the refusals of §7 (MoE with
// TP or PP, ZeRO-3 with TP or experts, AutoEP, pipelines without layer files, ...).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/file_meta.hpp"
#include "checkpoint/parallel_meta.hpp"

namespace z2f::checkpoint {

// True when the grid is more than one data-parallel ZeRO checkpoint (several mp ranks, layer
// files or expert files): those take this path, the rest discover_checkpoint's.
bool is_parallel_checkpoint(const FileGrid& grid);

std::vector<InputFileSpec> parallel_inputs(const FileGrid& grid);
// `metas` is indexed like parallel_inputs(grid).
ParallelCheckpointMeta assemble_parallel_meta(const FileGrid& grid, std::vector<FileMeta> metas);
// Reads every input in this process and assembles (tests, tools, single-rank runs).
ParallelCheckpointMeta read_parallel_checkpoint_meta(const FileGrid& grid);

// The data-parallel checkpoint of one (stage, TP rank), for the ZeRO-1/2 rules of
// plan_consolidation. Its tensor references keep the global input indices of `meta`.
CheckpointMeta data_parallel_meta(const ParallelCheckpointMeta& meta,
                                  const ModelParallelRank& rank);

}  // namespace z2f::checkpoint
