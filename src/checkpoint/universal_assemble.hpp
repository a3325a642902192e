// The metadata of a universal checkpoint, for conversion to Hugging Face formats
// (docs/universal-checkpoint.md §6). Inputs are numbered model files first (rank order), then
// one zero/<param>/fp32.pt per parameter folder (UniversalFolder::params order).
//
// A parameter file holds {'cat_dim': ..., 'param': T} (ZeRO-1/2, also accepted at ZeRO-3) or T
// itself (ZeRO-3); it is read as an OptimStatesInfo of layout kWholeParams with T as its one
// master, so that it crosses MPI on the ordinary codec. T may have any shape whose element count
// is the parameter's (full shape, (1,) for a 0-dim parameter, flat 1-D): the shape comes from
// param_shapes in the model file.
//
// A universal checkpoint of a tensor- or pipeline-parallel run holds mp_rank_00 .. mp_rank_NN
// (inputs kModelParallelRank after the first, read whole). Their param_shapes are joined, file
// after file, each name once; a parameter merged over the TP ranks has its local shape there and
// its whole shape (the vocabulary stripped) in its file, which then gives the shape. Buffers come
// from mp_rank_00's module (TP: replicated). Refused: frozen parameters of a TP run (their slices
// would need the merge rules), buffers of a pipeline (in its layer files, which a universal
// checkpoint does not hold); a pipeline's frozen parameters are not exported (a note says so).
//
// The assembled CheckpointMeta has layout kWholeParams and one OptimStatesInfo whose `master`
// holds every parameter's T in param_shapes order; world_size is the number of per-rank model
// files at ZeRO-3 (their frozen fragments are split over that many ranks), else the recorded
// dp_world_size (informational).
#pragma once

#include <cstdint>
#include <vector>

#include "checkpoint/assemble.hpp"
#include "checkpoint/universal_discovery.hpp"
#include "container/torch_file.hpp"

namespace z2f::checkpoint {

std::vector<InputFileSpec> universal_inputs(const UniversalFolder& folder);

OptimStatesInfo read_universal_param(const container::TorchFile& file, std::uint32_t file_index);

// `metas` is indexed like universal_inputs(folder).
CheckpointMeta assemble_universal_meta(const UniversalFolder& folder, std::vector<FileMeta> metas);

// Reads every input in this process and assembles (tests, tools, single-rank runs).
CheckpointMeta read_universal_checkpoint_meta(const UniversalFolder& folder);

}  // namespace z2f::checkpoint
