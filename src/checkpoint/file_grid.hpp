// The file grid of a tensor-, pipeline- or expert-parallel DeepSpeed checkpoint
// (docs/parallel-checkpoints.md §1): which file holds which (stage, TP rank, DP rank, layer,
// expert), found from the names of the tag folder alone.
//
//   mp_rank_MM_model_states.pt                          model-parallel rank MM = stage * TP + t
//   [bf16_|fp16_]zero_pp_rank_D_mp_rank_MM_optim_states.pt   ZeRO-1/2 partition D of MM
//   zero_pp_rank_D_mp_rank_MM_model_states.pt           ZeRO-3 partition D of TP rank MM
//   layer_LL-model_states.pt                            pipeline layer LL (no TP axis)
//   layer_LL-model_TT-model_states.pt                   pipeline layer LL, TP rank TT
//   layer_L_expert_E_mp_rank_MM_model_states.pt         MoE layer L, global expert E
//   expp_rank_R_mp_rank_MM_optim_states.pt              MoE expert-parallel rank R
//
// Degrees: the layer files decide pipeline parallelism (PP = MM count / TP with TP the number of
// distinct TT of one layer, 1 without the -model_TT form); without layer files every MM is a TP
// rank. Whatever the model files record (checkpoint_parallel_dimensions, mp_world_size) is
// cross-checked once they are read (assemble_parallel_meta). Every inconsistency is an error
// naming what is missing: a hole in MM, D, TT, E or R; a model rank without optimizer files;
// optimizer files of a rank without a model file; layer files of both forms; mixed optimizer
// prefixes; stray *_states.pt names.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/discovery.hpp"

namespace z2f::checkpoint {

struct LayerFile {
    std::uint64_t layer = 0;
    std::uint64_t tp_rank = 0;  // TT, 0 for the layer_LL-model_states.pt form
    std::string path;
};

struct ExpertFile {
    std::int64_t moe_layer = -1;  // -1: the old expert_E_mp_rank_MM form (one MoE layer)
    std::uint64_t expert = 0;     // global expert id
    std::uint64_t mp_rank = 0;
    std::string path;
};

struct FileGrid {
    TagFolder folder;
    // mp_rank_MM_model_states.pt, indexed by MM (0..mp_size-1, no holes).
    std::vector<std::string> model_files;
    // optim_files[MM][D]: every MM has the same number of data-parallel files; empty without
    // ZeRO-1/2 optimizer files (ZeRO-0, or a pipeline without ZeRO).
    std::vector<std::vector<std::string>> optim_files;
    std::string optim_prefix;  // "", "bf16_" or "fp16_"
    // ZeRO-3 (AutoTP's tp x dp grid): zero_pp_rank_D_mp_rank_MM_model_states.pt as
    // zero3_model_files[MM][D], every MM with the same D = 0..DP-1; model_files[MM] is then the
    // D = 0 file, whose param_shapes describe TP rank MM's slices. Empty at stages 0-2.
    std::vector<std::vector<std::string>> zero3_model_files;
    // Pipeline layer files, ordered by (layer, tp_rank); numbering may have gaps.
    std::vector<LayerFile> layer_files;
    bool layer_files_have_tp_rank = false;
    // MoE expert files ordered by (moe_layer, expert, mp_rank).
    std::vector<ExpertFile> expert_files;
    // expp_rank_R_mp_rank_MM_optim_states.pt: expert_optim_files[MM][R].
    std::vector<std::vector<std::string>> expert_optim_files;
    bool has_offloaded_tensors = false;

    std::uint32_t tp_degree = 1;  // from the names (see the header comment)
    std::uint32_t pp_degree = 1;

    std::uint32_t mp_size() const noexcept {
        return static_cast<std::uint32_t>(model_files.size());
    }
    std::uint32_t dp_size() const noexcept {
        return optim_files.empty() ? 0 : static_cast<std::uint32_t>(optim_files.front().size());
    }
    bool is_pipeline() const noexcept { return !layer_files.empty(); }
    bool is_zero3() const noexcept { return !zero3_model_files.empty(); }
    bool has_experts() const noexcept { return !expert_files.empty(); }
    // The model-parallel rank of (stage, TP rank).
    std::uint32_t mp_rank(std::uint32_t stage, std::uint32_t tp_rank) const noexcept {
        return stage * tp_degree + tp_rank;
    }
};

// Builds the grid from the names of a tag folder (pure: no file is opened). `tag_dir` is used in
// messages only.
FileGrid file_grid_from_names(const std::string& tag_dir, const std::vector<std::string>& names);

// Lists the tag folder (resolve_tag_folder) and builds its grid; every file must be a regular
// file.
FileGrid discover_file_grid(const std::string& checkpoint_dir, const std::string& tag);

}  // namespace z2f::checkpoint
