// Interpretation of DeepSpeed's pickles (docs/deepspeed-format.md §3, §4) into ModelStatesInfo
// and OptimStatesInfo. Decisions are made by key presence and type, never by ds_version or by the
// stage written in ds_config:
//   fp32_flat_groups                              -> stage 3 layout (per-param padding)
//   single_partition_of_fp32_groups + zero_stage  -> stage 1/2 layout (padding stripped)
//   single_partition_of_fp32_groups, no zero_stage -> BF16_Optimizer (padding kept)
// zero_stage is read in both pickled encodings of ZeroStageEnum: ZeroStageEnum(3) (by value)
// and getattr(ZeroStageEnum, 'weights') (by name, Python 3.11), or as a plain int (< 0.7).
#pragma once

#include <cstdint>

#include "checkpoint/checkpoint_meta.hpp"
#include "container/torch_file.hpp"

namespace z2f::checkpoint {

enum class ModelFileScope {
    kFull,                 // the first model file: names, shapes, buffers, ties, ...
    kFrozenFragmentsOnly,  // other stage-3 rank files: only this rank's frozen fragments
};

ModelStatesInfo read_model_states(const container::TorchFile& file, std::uint32_t file_index,
                                  ModelFileScope scope);
OptimStatesInfo read_optim_states(const container::TorchFile& file, std::uint32_t file_index);

}  // namespace z2f::checkpoint
