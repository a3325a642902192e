// Ulysses sequence parallelism (docs/deepspeed-format.md §11), told from the files' own metadata.
//
// DeepSpeed's Ulysses support (deepspeed.runtime.sequence_parallel, the "mpu" that Hugging Face
// integrations pass to deepspeed.initialize) splits activations along the sequence over S ranks
// and keeps every weight whole on each of them. ZeRO partitions over the sequence-data-parallel
// group, all S x DP ranks: W = S x DP optimizer files, exactly the layout of a data-parallel run
// of W ranks. What the files record:
//
//   model states  mp_world_size = 1 (the engine reports no model parallelism for this mpu)
//                 checkpoint_parallel_dimensions = {tp_degree: S, pp_degree: 1} (DeepSpeed >=
//                 0.19.5: the mpu answers the tensor-parallel size query with its sequence-
//                 parallel size; absent before)
//                 dp_world_size = W
//   file names    DeepSpeed >= 0.19.6: mp_rank_00 everywhere.
//                 DeepSpeed 0.17 - 0.19.5: the mp rank in a name is the writer's sequence-parallel
//                 rank, R mod S for ZeRO rank R (sequence-parallel groups are runs of S
//                 consecutive ranks): zero_pp_rank_R_mp_rank_{R mod S}_optim_states.pt, at
//                 ZeRO-3 also zero_pp_rank_R_mp_rank_{R mod S}_model_states.pt; the ZeRO-1/2
//                 model file stays mp_rank_00_model_states.pt (written by ZeRO rank 0 alone).
//
// A checkpoint is sequence-parallel when its model file records mp_world_size 1 together with
// a tp_degree above 1 (pp_degree at most 1), or, without checkpoint_parallel_dimensions, when
// its names carry mp ranks above 00 while mp_world_size is 1. The names alone never decide: a
// tensor-parallel checkpoint whose other ranks' files are missing can look the same.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_meta.hpp"
#include "checkpoint/discovery.hpp"

namespace z2f::checkpoint {

// checkpoint_parallel_dimensions' tp_degree when the file records mp_world_size 1 and a
// pp_degree of at most 1: the sequence-parallel degree; 1 otherwise (also when the file records
// no degrees).
std::int64_t recorded_sequence_parallel_degree(const ModelStatesInfo& model);

// Whether the model file records tensor or pipeline parallelism (a degree above 1 that is not
// the sequence-parallel degree above, or mp_world_size above 1): what the data-parallel reader
// cannot read from the files of model-parallel rank 00.
bool records_model_parallelism(const ModelStatesInfo& model);

// Names only, for routing: the tag folder's ZeRO files name model-parallel ranks above 00 in the
// shape sequence parallelism gives them (each data-parallel rank once over all mp ranks, a
// single mp_rank_00_model_states.pt if any, no layer or expert files). A tensor-parallel grid
// names each data-parallel rank once per TP rank, so it never has this shape.
bool has_sequence_parallel_names(const std::vector<std::string>& names);

// The sequence-parallel degree of a data-parallel checkpoint (1 without sequence parallelism),
// after checking the names against the metadata of its first model file: mp ranks in the names
// need mp_world_size 1, the recorded degree must divide the number of optimizer files, and every
// file's mp rank must be 00 or its ZeRO rank mod S. Throws, naming the file and the layout,
// when they disagree.
std::uint32_t resolve_sequence_parallel(const CheckpointFiles& files, const ModelStatesInfo& model);

// The note a run prints for a sequence-parallel checkpoint of `world` ZeRO ranks.
std::string sequence_parallel_note(std::uint32_t degree, std::uint32_t world,
                                   const std::string& model_path);

}  // namespace z2f::checkpoint
