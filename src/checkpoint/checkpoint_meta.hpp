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

#include "checkpoint/autoep_meta.hpp"
#include "checkpoint/discovery.hpp"
#include "checkpoint/pickled_value.hpp"
#include "common/dtype.hpp"
#include "common/extent.hpp"

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
    // ds_autoep_layers, read from every model file (at ZeRO-3 each rank records its own place).
    AutoEpInfo autoep;

    friend bool operator==(const ModelStatesInfo&, const ModelStatesInfo&) = default;
};

enum class MasterLayout : std::uint8_t {
    kFlatGroups,    // stage 1/2: single_partition_of_fp32_groups, padding stripped
    kPaddedGroups,  // BF16_Optimizer: single_partition_of_fp32_groups, padding kept
    kPerParam,      // stage 3: fp32_flat_groups, each param padded to ceil(n/W) per rank
    // A universal checkpoint: each parameter's fp32 master whole in zero/<param>/fp32.pt; `master`
    // lists them in param_shapes order, one entry per parameter (docs/universal-checkpoint.md §6).
    kWholeParams,
};
inline constexpr MasterLayout kLastMasterLayout = MasterLayout::kWholeParams;

// Adam's `step` of one flat group, as the torch optimizer state holds it: a 0-dim float32
// tensor since torch 1.12, a Python int (or float) before. The value is read in the metadata
// phase (a few bytes), so that the universal step.pt and optimizer_state.pt are known whole
// from the metadata (docs/universal-checkpoint.md §3).
struct OptimizerStep {
    enum class Form : std::uint8_t { kTensor, kInt, kFloat };
    Form form = Form::kTensor;
    DType dtype = DType::kF32;         // kTensor
    std::vector<std::uint64_t> shape;  // kTensor: () in practice, one element always
    std::uint64_t bits = 0;  // kTensor: the element's bytes, little-endian; kInt: the value as
                             // two's complement; kFloat: the IEEE-754 double

    friend bool operator==(const OptimizerStep&, const OptimizerStep&) = default;
};

// The optimizer state of one flat group (stage 1/2: a param group, stage 3: a sub-group), from
// base_optimizer_state (stage 1/2, BF16_Optimizer) or the inner optimizer_state_dict (stage 3).
// Absent pieces (a checkpoint saved without optimizer state, a non-Adam optimizer, a group that
// never stepped) are nullopt: only universal output needs them, and refuses their absence.
struct OptimizerGroupState {
    std::optional<TensorRef> exp_avg;  // 1-D, laid out like the group's master partition
    std::optional<TensorRef> exp_avg_sq;
    std::optional<OptimizerStep> step;
    // Every key of the group's state entry that holds a tensor, in file order (exp_avg,
    // exp_avg_sq, step for Adam; momentum_buffer for Muon): what a refusal names when the
    // moments a universal checkpoint needs are not there.
    std::vector<std::string> tensor_keys;

    friend bool operator==(const OptimizerGroupState&, const OptimizerGroupState&) = default;
};

// One entry of optimizer_state_dict kept for the universal optimizer_state.pt: key and value are
// nodes of OptimizerGlobalState::graph.
struct PickledEntry {
    std::string key;
    std::uint32_t key_node = 0;
    std::uint32_t value_node = 0;

    friend bool operator==(const PickledEntry&, const PickledEntry&) = default;
};

// What the universal zero/optimizer_state.pt re-emits (docs/universal-checkpoint.md §4): the
// scalars of optimizer_state_dict (loss_scaler, dynamic_loss_scale, overflow, clip_grad,
// zero_stage, group_paddings, partition_count, ds_version: those present, in file order) and
// the torch optimizer's param_groups (stage 1/2: base_optimizer_state.param_groups, stage 3:
// optimizer_state_dict.optimizer_state_dict.param_groups), never the partitions.
struct OptimizerGlobalState {
    PickledGraph graph;
    std::vector<PickledEntry> entries;
    std::optional<std::uint32_t> param_groups;  // nullopt: absent (elastic checkpoints)

    friend bool operator==(const OptimizerGlobalState&, const OptimizerGlobalState&) = default;
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
    // AutoEP (ds_zero_partition_groups): each sub-group's partition group; empty when absent.
    std::vector<ZeroPartitionGroup> partition_groups;
    // Parallel to `master`, or empty when the file holds no optimizer state at all.
    std::vector<OptimizerGroupState> group_states;
    OptimizerGlobalState global_state;

    friend bool operator==(const OptimStatesInfo&, const OptimStatesInfo&) = default;
};

// Everything consolidation needs, assembled and cross-checked (see assemble_checkpoint_meta).
struct CheckpointMeta {
    CheckpointFiles files;
    // Input files: model files (rank order) then optimizer files (rank order).
    std::vector<std::string> inputs;
    std::vector<std::uint64_t> input_sizes;
    std::vector<InputRecord> records;  // every input's storage records, in input order
    std::uint32_t world_size = 0;
    // Ulysses sequence-parallel degree S (sequence_parallel.hpp): world_size is S x DP; 1 without.
    std::uint32_t sequence_parallel = 1;
    int zero_stage = 0;  // 1, 2 or 3 as recorded (BF16_Optimizer: 1)
    MasterLayout layout = MasterLayout::kFlatGroups;
    std::string ds_version;
    ModelStatesInfo model;  // from the first model file
    // Stage 3: frozen_param_fragments of every model file, rank order.
    std::vector<std::vector<NamedTensor>> frozen_fragments_by_rank;
    // Stage 3: ds_autoep_layers of every model file, rank order (AutoEP: each its own place).
    std::vector<AutoEpInfo> autoep_by_rank;
    std::vector<OptimStatesInfo> optim;  // rank order
    std::vector<std::string> notes;      // informational findings (printed with -v)
    std::vector<std::string> warnings;   // what the user must know (printed always)
};

}  // namespace z2f::checkpoint
