// Finding the files of a DeepSpeed checkpoint (docs/deepspeed-format.md §1).
//
//   CKPT_DIR/latest                       the tag as text (stripped of whitespace)
//   CKPT_DIR/<tag>/                        the tag folder:
//     [bf16_|fp16_]zero_pp_rank_R_mp_rank_MM_optim_states.pt    one per data-parallel rank R
//     mp_rank_MM_model_states.pt                                 stage 0-2: one model file
//     zero_pp_rank_R_mp_rank_MM_model_states.pt                  stage 3: one per rank
//
// R is never padded, MM has at least two digits. CKPT_DIR may also be the tag folder itself.
// Names are parsed exactly; files of the parallel layouts (pipeline `layer_*`, MoE expert
// files, mp_rank MM > 00) are refused here: checkpoint/routing.hpp sends such folders to the
// parallel reader (file_grid.hpp) instead. The exception: ZeRO files whose MM numbers
// sequence-parallel ranks, one file per data-parallel rank R (sequence_parallel.hpp). Whether the
// rank grid matches the world size recorded inside the files is checked once their contents are
// known (assemble_checkpoint_meta).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace z2f::checkpoint {

enum class CheckpointFileRole {
    kOptimStates,         // [bf16_|fp16_]zero_pp_rank_R_mp_rank_MM_optim_states.pt
    kModelStates,         // mp_rank_MM_model_states.pt
    kRankModelStates,     // zero_pp_rank_R_mp_rank_MM_model_states.pt
    kPipelineLayer,       // layer_LL[-model_MM]-model_states.pt
    kExpertModelStates,   // [layer_L_]expert_E_mp_rank_MM_model_states.pt
    kExpertOptimStates,   // expp_rank_R_mp_rank_MM_optim_states.pt
    kUnrecognizedStates,  // any other *_optim_states.pt / *_model_states.pt
    kOther,               // not part of the checkpoint proper (zero_to_fp32.py, rng states, ...)
};

struct CheckpointFileName {
    CheckpointFileRole role = CheckpointFileRole::kOther;
    std::uint64_t dp_rank = 0;  // kExpertOptimStates: the expert-parallel rank
    std::uint64_t mp_rank = 0;  // kPipelineLayer: the TP rank TT of layer_LL-model_TT
    std::string prefix;         // "", "bf16_" or "fp16_" for optimizer files
    // kPipelineLayer: LL. kExpertModelStates: the MoE layer L (-1 for the old expert_E_... form).
    std::int64_t layer = -1;
    std::uint64_t expert = 0;        // kExpertModelStates: the global expert id E
    bool layer_has_tp_rank = false;  // kPipelineLayer: the layer_LL-model_TT form
};

// Parses one file name of a tag folder (pure; the grammar of §1.2).
CheckpointFileName parse_checkpoint_file_name(std::string_view name);

struct CheckpointFiles {
    std::string checkpoint_dir;  // absolute; the folder holding `latest` (or the tag's parent)
    std::string tag;
    std::string tag_dir;  // absolute
    // Absolute paths in rank order. Stage 0-2 checkpoints have one model file, stage 3 one per
    // rank (`per_rank_model_files`).
    std::vector<std::string> model_files;
    bool per_rank_model_files = false;
    std::vector<std::string> optim_files;
    std::string optim_prefix;  // "", "bf16_" or "fp16_"
    // The mp rank each name carries, parallel to optim_files and model_files (empty: all 00).
    // Above 00 only in the names DeepSpeed's Ulysses sequence parallelism gave its files
    // (sequence_parallel.hpp); checked against the metadata when it is read.
    std::vector<std::uint64_t> optim_mp_ranks;
    std::vector<std::uint64_t> model_mp_ranks;
    // <tag_dir>/offloaded_tensors exists: ZeRO-3 NVMe optimizer offload.
    bool has_offloaded_tensors = false;
};

// The folder holding a checkpoint's files (docs/deepspeed-format.md §1.1).
struct TagFolder {
    std::string checkpoint_dir;  // absolute
    std::string tag;
    std::string tag_dir;  // absolute
};

struct DiscoveryOptions {
    // Follow CKPT_DIR/latest_universal even when CKPT_DIR/latest exists.
    bool from_universal = false;
};

// `tag` empty means: read CKPT_DIR/latest (or latest_universal, see universal_discovery.hpp), or
// use CKPT_DIR itself when it is a tag folder (it holds *_optim_states.pt files, or - pipelines
// without ZeRO - mp_rank_XX_model_states.pt, or a universal checkpoint's zero/ folder).
TagFolder resolve_tag_folder(const std::string& checkpoint_dir, const std::string& tag,
                             const DiscoveryOptions& options = {});

// `tag` empty: as resolve_tag_folder. A universal tag folder is not one of these
// (universal_discovery.hpp reads it): an internal error.
CheckpointFiles discover_checkpoint(const std::string& checkpoint_dir, const std::string& tag,
                                    const DiscoveryOptions& options = {});

// Hugging Face files worth carrying next to the weights so that from_pretrained(OUT_DIR) works
// (config.json, generation_config.json, tokenizer*, special_tokens_map.json, chat_template*,
// ...), found in `dir`. Names only, sorted.
std::vector<std::string> find_hf_side_files(const std::string& dir);

}  // namespace z2f::checkpoint
