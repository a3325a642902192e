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
// Which folder discovery takes: `-t TAG` names it (universal or not by its content);
// a CKPT_DIR that is itself a tag folder is used as such; otherwise `latest` wins over
// `latest_universal` unless DiscoveryOptions::from_universal, and `latest_universal` alone is
// followed.
#pragma once

#include <string>
#include <vector>

#include "checkpoint/discovery.hpp"

namespace z2f::checkpoint {

inline constexpr const char* kLatestUniversal = "latest_universal";

// `dir` holds zero/optimizer_state.pt and no *_optim_states.pt file.
bool is_universal_tag_dir(const std::string& dir);

// A universal checkpoint's folder: its tag folder and model-states copies (`files`, which lists
// no optimizer files) and its parameter folders.
struct UniversalFolder {
    CheckpointFiles files;
    std::vector<std::string> params;  // the zero/<param>/ folders holding fp32.pt, natural order
};

// Lists the universal tag folder `folder`, with the checks of ordinary discovery on the model
// files (names, ranks without holes, one kind).
UniversalFolder list_universal_tag(const TagFolder& folder);

// `tag` empty: as resolve_tag_folder (discovery.hpp). An input error when the folder is no
// universal checkpoint.
UniversalFolder discover_universal_checkpoint(const std::string& checkpoint_dir,
                                              const std::string& tag,
                                              const DiscoveryOptions& options = {});

// <tag_dir>/zero/<param>/fp32.pt
std::string universal_fp32_path(const UniversalFolder& folder, const std::string& param);

}  // namespace z2f::checkpoint
