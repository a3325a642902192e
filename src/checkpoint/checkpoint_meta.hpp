// What a DeepSpeed checkpoint says about itself, reduced to the facts consolidation needs.
//
// Each file's pickle is interpreted into a small struct (ModelStatesInfo / OptimStatesInfo) on
// whichever rank parsed it; those structs are all that crosses MPI (see meta_codec.hpp). They
// hold names, shapes, dtypes and byte ranges of tensors, never tensor bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/discovery.hpp"
#include "common/dtype.hpp"

namespace z2f::checkpoint {

// Where a tensor's bytes are: a contiguous byte range of input file `file` (an index into
// CheckpointMeta::inputs).
struct TensorRef {
    std::uint32_t file = 0;
    DType dtype = DType::kF32;
    std::vector<std::uint64_t> shape;
    std::uint64_t numel = 0;
    std::uint64_t offset = 0;  // absolute file offset of element 0
    std::uint64_t length = 0;  // numel * itemsize

    friend bool operator==(const TensorRef&, const TensorRef&) = default;
};

struct NamedShape {
    std::string name;
    std::vector<std::uint64_t> shape;
    friend bool operator==(const NamedShape&, const NamedShape&) = default;
};

struct NamedTensor {
    std::string name;
    TensorRef tensor;
    friend bool operator==(const NamedTensor&, const NamedTensor&) = default;
};

// From a model-states file (docs/deepspeed-format.md §3).
struct ModelStatesInfo {
    std::string ds_version;
    bool module_is_none = false;  // PipelineEngine writes module=None
    // Tensors of `module`, in order (placeholders of size 0 at stage 3 included).
    std::vector<NamedTensor> module_tensors;
    bool has_buffer_names = false;
    std::vector<std::string> buffer_names;
    // One ordered list per flat group (stage 1/2: param group, stage 3: sub-group); nullopt
    // when the key is absent or None.
    std::optional<std::vector<std::vector<NamedShape>>> param_shapes;
    // nullopt when absent or None (stage 1, or saved with exclude_frozen_parameters).
    std::optional<std::vector<NamedShape>> frozen_param_shapes;
    std::vector<NamedTensor> frozen_param_fragments;
    // alias -> owner; nullopt when the key is absent (DeepSpeed < 0.9.2) or None.
    std::optional<std::vector<std::pair<std::string, std::string>>> shared_params;
    std::int64_t dp_world_size = -1;  // -1: absent
    std::int64_t mp_world_size = -1;
    std::int64_t tp_degree = -1;  // checkpoint_parallel_dimensions (DeepSpeed >= 0.19.5)
    std::int64_t pp_degree = -1;
    bool autoep_zero3 = false;  // ds_autoep_layers with checkpoint_format zero3_partitioned

    friend bool operator==(const ModelStatesInfo&, const ModelStatesInfo&) = default;
};

enum class MasterLayout : std::uint8_t {
    kFlatGroups,    // stage 1/2: single_partition_of_fp32_groups, padding stripped
    kPaddedGroups,  // BF16_Optimizer: single_partition_of_fp32_groups, padding kept
    kPerParam,      // stage 3: fp32_flat_groups, each param padded to ceil(n/W) per rank
};

// From an optimizer-states file (docs/deepspeed-format.md §4).
struct OptimStatesInfo {
    std::string ds_version;
    MasterLayout layout = MasterLayout::kFlatGroups;
    std::int64_t zero_stage = -1;  // decoded ZeroStageEnum or int; -1: absent (BF16_Optimizer)
    std::vector<std::int64_t> partition_count;  // one entry, or one per param group
    std::vector<TensorRef> master;              // per group (stage 1/2) or sub-group (stage 3)
    // Pre-0.6 checkpoints kept param_shapes in the optimizer files.
    std::optional<std::vector<std::vector<NamedShape>>> param_shapes;
    // AutoEP (ds_zero_partition_groups): partition counts per sub-group; empty when absent.
    std::vector<std::int64_t> subgroup_partition_counts;

    friend bool operator==(const OptimStatesInfo&, const OptimStatesInfo&) = default;
};

// Everything consolidation needs, assembled and cross-checked (see assemble_checkpoint_meta).
struct CheckpointMeta {
    CheckpointFiles files;
    // Input files: model files (rank order) then optimizer files (rank order).
    std::vector<std::string> inputs;
    std::vector<std::uint64_t> input_sizes;
    std::uint32_t world_size = 0;
    int zero_stage = 0;  // 1, 2 or 3 as recorded (BF16_Optimizer: 1)
    MasterLayout layout = MasterLayout::kFlatGroups;
    std::string ds_version;
    ModelStatesInfo model;  // from the first model file
    // Stage 3: frozen_param_fragments of every model file, rank order.
    std::vector<std::vector<NamedTensor>> frozen_fragments_by_rank;
    std::vector<OptimStatesInfo> optim;  // rank order
    std::vector<std::string> notes;      // informational findings (printed with -v)
};

}  // namespace z2f::checkpoint
