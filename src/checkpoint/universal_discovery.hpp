// Recognising and listing a universal checkpoint folder (docs/universal-checkpoint.md §1, §6),
// for conversion to Hugging Face formats:
//
//   CKPT_DIR/latest_universal             the folder name, as text
//   CKPT_DIR/<tag>_universal/
//     zero/optimizer_state.pt             what makes a folder universal (with no
//                                         *_optim_states.pt beside it)
//     zero/<param>/fp32.pt                one folder per trainable parameter
//     mp_rank_00_model_states.pt          (ZeRO-1/2) or zero_pp_rank_R_mp_rank_00_... (ZeRO-3):
//                                         copies of the originals, for names, shapes, buffers,
//                                         frozen parameters and ties; mp_rank_00 .. mp_rank_NN
//                                         (one per TP rank or pipeline stage) for a tensor- or
//                                         pipeline-parallel run
//
// Which folder discover_checkpoint takes: `-t TAG` names it (universal or not by its content);
// a CKPT_DIR that is itself a tag folder is used as such; otherwise `latest` wins over
// `latest_universal` unless DiscoveryOptions::from_universal, and `latest_universal` alone is
// followed.
#pragma once

#include <string>

#include "checkpoint/discovery.hpp"

namespace z2f::checkpoint {

inline constexpr const char* kLatestUniversal = "latest_universal";

// `dir` holds zero/optimizer_state.pt and no *_optim_states.pt file.
bool is_universal_tag_dir(const std::string& dir);

// Fills files.model_files, per_rank_model_files and universal_params from files.tag_dir, with
// the checks of ordinary discovery on the model files (names, ranks without holes, one kind).
void list_universal_tag(CheckpointFiles& files);

// <tag_dir>/zero/<param>/fp32.pt
std::string universal_fp32_path(const CheckpointFiles& files, const std::string& param);

}  // namespace z2f::checkpoint
