// What the files of a tensor-, pipeline- or expert-parallel checkpoint say beyond the
// data-parallel facts of checkpoint_meta.hpp (docs/parallel-checkpoints.md §2-§5). Like those
// structs they hold names, shapes and byte ranges, never tensor bytes, and cross MPI through
// meta_codec.hpp (as parts of file_meta.hpp's FileMeta).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "checkpoint/checkpoint_meta.hpp"
#include "checkpoint/file_grid.hpp"

namespace z2f::checkpoint {

// One entry of a recorded sub-parameter shape: an int (-1 for "the rest"), or a tuple (or list)
// of ints (the sub-parameter sizes at the partition dimension).
struct SubParamShapeDim {
    enum class Kind : std::uint8_t { kInt, kTuple, kList };
    Kind kind = Kind::kInt;
    std::vector<std::int64_t> values;  // kInt: one value

    friend bool operator==(const SubParamShapeDim&, const SubParamShapeDim&) = default;
};

// One `parameter_with_sub_params` entry of universal_checkpoint_info: a parameter fused from
// several sub-parameters along `partition_dim`, each split over the TP ranks on its own.
struct SubParamsSpec {
    std::vector<std::string> patterns;
    std::uint64_t partition_dim = 0;
    // The entry at partition_dim of the recorded shape: either the sub-parameter sizes (a
    // tuple, UCP >= 0.4 and some older writers) or their count (an int: equal sizes).
    std::vector<std::uint64_t> sub_sizes;
    std::uint64_t sub_count = 0;  // used when sub_sizes is empty
    // sub_param_shard_widths of the first pattern that has them: [sub-parameter][TP rank].
    std::vector<std::vector<std::uint64_t>> shard_widths;
    // The recorded shape itself, entry by entry, and whether it was a tuple (else a list): what
    // a universal checkpoint's sub_param_shape object carries again.
    std::vector<SubParamShapeDim> shape;
    bool shape_is_tuple = false;

    friend bool operator==(const SubParamsSpec&, const SubParamsSpec&) = default;
};

// Megatron-DeepSpeed's (and AutoTP's) universal_checkpoint_info, the TP merge rules a checkpoint
// carries. Patterns are Python regexes applied with re.match (anchored at the start only).
struct UniversalCheckpointInfo {
    double version = 0.0;  // universal_checkpoint_version (0 when absent)
    std::vector<std::string> vocabulary;
    std::vector<std::string> tp_replicated;
    std::vector<std::string> row_parallel;
    std::vector<std::string> to_average;
    std::vector<std::string> two_sub_params_cat_dim_0;
    std::vector<std::string> pipeline_replicated;
    std::vector<SubParamsSpec> sub_params;
    // autotp_unsupported_parameter_patterns: pattern -> why AutoTP could not describe it.
    std::vector<std::pair<std::string, std::string>> unsupported;
    std::int64_t original_vocab_size = -1;  // -1: absent
    std::int64_t padded_vocab_size = -1;
    // AutoTP wrote it (it always records autotp_unsupported_parameter_patterns): its runtime
    // restores each rank's slice from its own partition metadata, not by torch.chunk.
    bool autotp = false;

    friend bool operator==(const UniversalCheckpointInfo&,
                           const UniversalCheckpointInfo&) = default;
};

// The fp32 masters a 16-bit run without ZeRO kept in its model file (zero0_masters.hpp).
struct Zero0Masters {
    std::string key;            // "fp32_groups" or "fp32_groups_flat"; empty: no masters
    std::uint64_t tensors = 0;  // master tensors in the file (flat: one per param group)
    // Module name -> master, in module order; a flat group's slice is shaped like its parameter.
    std::vector<NamedTensor> masters;

    friend bool operator==(const Zero0Masters&, const Zero0Masters&) = default;
};

// Facts of an mp_rank_MM_model_states.pt beyond ModelStatesInfo.
struct ParallelModelExtras {
    std::optional<UniversalCheckpointInfo> universal_info;
    // num_experts of a MoE model: one entry per MoE layer, in module order.
    std::vector<std::int64_t> num_experts;
    // `optimizer` is a dict: the torch optimizer.state_dict() of a run without ZeRO.
    bool has_plain_optimizer_state = false;
    Zero0Masters zero0_masters;

    friend bool operator==(const ParallelModelExtras&, const ParallelModelExtras&) = default;
};

// One entry of param_slice_mappings: `numel` elements of parameter `name` at element `start`
// of this rank's flat partition of the group.
struct SliceMapping {
    std::string name;
    std::uint64_t start = 0;
    std::uint64_t numel = 0;
    friend bool operator==(const SliceMapping&, const SliceMapping&) = default;
};

// A ZeRO-1/2 optimizer group as the optimizer files describe it (base_optimizer_state's
// param_groups and param_slice_mappings).
struct OptimGroupExtras {
    std::string name;  // param_groups[g]['name'], empty when absent
    bool moe = false;  // param_groups[g]['moe'] is True: an expert group
    std::vector<SliceMapping> slices;
    friend bool operator==(const OptimGroupExtras&, const OptimGroupExtras&) = default;
};

struct ParallelOptimExtras {
    std::vector<OptimGroupExtras> groups;  // empty when param_slice_mappings is absent
    friend bool operator==(const ParallelOptimExtras&, const ParallelOptimExtras&) = default;
};

// A pipeline layer file or a MoE expert file: a plain state dict name -> tensor, in order.
struct StateDictInfo {
    std::vector<NamedTensor> tensors;
    friend bool operator==(const StateDictInfo&, const StateDictInfo&) = default;
};

// A model or optimizer file of any checkpoint: the facts every reader needs, and the extras only
// a file grid's inputs read (empty otherwise; file_meta.hpp).
struct ModelFile {
    ModelStatesInfo states;
    ParallelModelExtras extras;
    friend bool operator==(const ModelFile&, const ModelFile&) = default;
};
struct OptimFile {
    OptimStatesInfo states;
    ParallelOptimExtras extras;
    friend bool operator==(const OptimFile&, const OptimFile&) = default;
};

// One (stage, TP rank) of the grid: its model file and its ZeRO partitions.
struct ModelParallelRank {
    std::uint32_t stage = 0;
    std::uint32_t tp_rank = 0;
    ModelFile model;
    std::uint32_t model_input = 0;  // index into ParallelCheckpointMeta::inputs
    std::vector<OptimFile> optim;   // data-parallel rank order; empty without ZeRO-1/2
    std::vector<std::uint32_t> optim_inputs;
    // ZeRO-3: the model files of data-parallel ranks 1..DP-1 (their frozen fragments).
    std::vector<ModelFile> zero3_peers;
    std::vector<std::uint32_t> zero3_peer_inputs;
};

struct LayerStateDict {
    std::uint64_t layer = 0;
    std::uint64_t tp_rank = 0;
    std::uint32_t input = 0;
    StateDictInfo state;
};

struct ExpertStateDict {
    std::int64_t moe_layer = -1;
    std::uint64_t expert = 0;
    std::uint32_t input = 0;
    StateDictInfo state;
};

enum class ParallelKind : std::uint8_t {
    kTensorParallel,    // mp ranks are TP ranks (PP = 1), TP >= 1
    kPipeline,          // layer files: stages (x TP)
    kMixtureOfExperts,  // expert files
};

// Everything the parallel plan needs, assembled and cross-checked (assemble_parallel_meta).
struct ParallelCheckpointMeta {
    FileGrid grid;
    ParallelKind kind = ParallelKind::kTensorParallel;
    std::vector<std::string> inputs;
    std::vector<std::uint64_t> input_sizes;
    std::vector<InputRecord> records;  // every input's storage records, in input order
    std::uint32_t tp_degree = 1;
    std::uint32_t pp_degree = 1;
    std::uint32_t dp_degree = 1;  // optimizer files per mp rank (1 without ZeRO)
    bool zero = false;            // ZeRO partitions (any stage) or BF16_Optimizer's exist
    std::string ds_version;
    std::vector<ModelParallelRank> ranks;  // mp rank order (= stage * TP + t)
    std::vector<LayerStateDict> layers;    // (layer, tp rank) order
    std::vector<ExpertStateDict> experts;  // (moe layer, expert) order
    std::vector<std::string> notes;
};

}  // namespace z2f::checkpoint
