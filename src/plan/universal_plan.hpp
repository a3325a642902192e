// The tensors of a universal checkpoint (docs/universal-checkpoint.md §2, §10): for every
// trainable parameter, its fp32 master weight and Adam's exp_avg and exp_avg_sq, each whole and
// without any data-parallel padding, in float32, with what the files around them need (the keys
// of the parameter's dict, its Adam step, the model-states files to copy). Pure: a function of
// the assembled metadata, like the consolidation plans whose extents formulas it reuses on each
// stream (consolidation.hpp, parallel_plan.hpp).
//
// Data-parallel checkpoints (plan_universal): parameters in param_shapes order (one name per
// tied set, the owner). Shapes are those the files store: stage 1/2 the parameter's full shape,
// a 0-dim parameter as (1,) (DeepSpeed's loader chunks every `param` and cannot take a 0-dim
// tensor); stage 3 the flat 1-D (numel,) that its loader views as it likes.
//
// Tensor- and pipeline-parallel checkpoints with ZeRO-1/2 or BF16_Optimizer partitions
// (plan_parallel_universal): each stream merged over the TP ranks and joined over the stages
// exactly as plan_parallel_consolidation merges the masters, the padded vocabulary stripped to
// original_vocab_size rows; a tied pipeline weight once, at its first stage. The dict keys
// before 'param' follow the parameter's merge rule as ds_to_universal.py writes them:
//   no rules (TP 1)          cat_dim 0
//   cat along d              cat_dim d
//   replicated, average      none
//   2 fused sub-parameters   cat_dim 0, param_n_sub_params 2 (and K equal sub-parameters of a
//                            --tp-rules file: cat_dim d, param_n_sub_params K)
//   vocabulary               the above, then vocab_tensor True
// Refused: Mixture-of-Experts and ZeRO-0 checkpoints (no DeepSpeed loader reads a universal
// checkpoint of them), parameters to average (the copy engine computes no means),
// parameter_with_sub_params entries (their sub_param_shape object is not written), and TP slices
// the loader would cut differently than they were saved (it re-slices with torch.chunk).
//
// Everything a universal checkpoint needs from the source is checked here, before any file is
// laid out: every rank's moments of every flat group, the Adam step of every group (equal on every
// rank), param_groups with one entry per param group (stage 1/2: the loader zips them with its
// own groups and silently skips the surplus), parameter names usable as folder names.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "checkpoint/checkpoint_meta.hpp"
#include "checkpoint/parallel_meta.hpp"
#include "plan/parallel_plan.hpp"
#include "plan/tensor_plan.hpp"

namespace z2f::plan {

// The SubparamShape object (deepspeed.checkpoint.universal_checkpoint) that DeepSpeed's
// converter stores with a parameter_with_sub_params parameter: a dataclass pickled as the class,
// NEWOBJ and its __dict__ {'patterns': [...], 'shape': [...], 'partition_dim': d}.
struct SubParamShapeValue {
    std::vector<std::string> patterns;
    std::vector<checkpoint::SubParamShapeDim> shape;
    bool shape_is_tuple = false;
    std::uint64_t partition_dim = 0;

    friend bool operator==(const SubParamShapeValue&, const SubParamShapeValue&) = default;
};

// An entry of a parameter file's dict other than 'param': an int, a bool or a SubparamShape.
struct ParamDictEntry {
    ParamDictEntry() = default;
    ParamDictEntry(std::string key_, std::int64_t value_, bool is_bool_)
        : key(std::move(key_)), value(value_), is_bool(is_bool_) {}

    std::string key;
    std::int64_t value = 0;
    bool is_bool = false;                      // pickled as True / False
    std::optional<SubParamShapeValue> object;  // set: the value is this object
    bool after_param = false;                  // written after 'param' (AutoEP's expert keys)

    friend bool operator==(const ParamDictEntry&, const ParamDictEntry&) = default;
};

struct UniversalParam {
    std::string name;       // the param_shapes name: its folder zero/<name>/
    std::size_t group = 0;  // its flat group in param_shapes (of its first stage)
    // Index in UniversalPlan::plan.tensors of its fp32, exp_avg and exp_avg_sq tensors (in the
    // order of plan::Stream).
    std::array<std::uint32_t, 3> tensors{};
    // ZeRO-1/2: the dict's entries around 'param', and step.pt's value (its group's step).
    std::vector<ParamDictEntry> entries = {{"cat_dim", 0, false}};
    std::optional<checkpoint::OptimizerStep> step;
    // The file holds the bare tensor, not a dict (plain ZeRO-3, flat).
    bool raw = false;
};

// A model-states file copied byte for byte into the universal folder.
struct UniversalCopy {
    std::string path;         // the input file
    std::uint32_t input = 0;  // its index in plan.inputs
    std::uint64_t size = 0;
};

struct UniversalPlan {
    TensorPlan plan;  // three tensors per parameter, named "<name>/fp32", "<name>/exp_avg", ...
    std::vector<UniversalParam> params;
    std::string tag;                    // the source tag: the folder is "<tag>_universal"
    bool stage3 = false;                // no step.pt (the ZeRO-3 loaders read none)
    std::vector<UniversalCopy> copies;  // in writing order
    std::vector<std::string> warnings;
    std::vector<std::string> notes;
};

UniversalPlan plan_universal(const checkpoint::CheckpointMeta& meta);

// `options` as for Hugging Face output (--tp-rules, --tp-replicated); the dtype, frozen
// parameters and vocabulary stripping are the universal format's own.
UniversalPlan plan_parallel_universal(const checkpoint::ParallelCheckpointMeta& meta,
                                      const ParallelPlanOptions& options);

// The data-parallel checkpoint whose first optimizer file gives zero/optimizer_state.pt: stage
// 0, TP rank 0 (ds_to_universal.py takes pipeline stage 0, TP rank 0, DP rank 0).
checkpoint::CheckpointMeta universal_optimizer_source(
    const checkpoint::ParallelCheckpointMeta& meta);

// What every universal checkpoint needs from its optimizer files (data-parallel view): an Adam
// step in every group the files take one from, equal on every rank; param_groups, one per flat
// group at ZeRO-1/2 (the loader zips them with its own groups). Input errors name the file.
void check_universal_steps(const checkpoint::CheckpointMeta& meta);
void check_universal_param_groups(const checkpoint::CheckpointMeta& meta);

// The three tensors of every parameter, in UniversalParam::tensors order.
inline constexpr std::array<Stream, 3> kUniversalStreams = {Stream::kMaster, Stream::kExpAvg,
                                                            Stream::kExpAvgSq};

// How each stream of a data-parallel view is planned: float32, trainable parameters only.
PlanOptions universal_stream_options(Stream stream);

// The param_shapes group of every parameter of `model`.
std::unordered_map<std::string, std::size_t> param_group_of(
    const checkpoint::ModelStatesInfo& model);

// Appends `tensor`, stream `s` of `param`, named "<name>/<stream>" and shaped as the files store
// it: flat (numel,) when param.raw (a bare ZeRO-3 tensor), (1,) for a 0-dim parameter.
void add_stream_tensor(UniversalPlan& result, UniversalParam& param, std::size_t s,
                       PlannedTensor tensor);

// Throws an input error unless `name` can be a folder name on every file system we write to:
// not empty, not "." or "..", no '/' and no NUL.
void check_universal_param_name(const std::string& name, const std::string& origin);

}  // namespace z2f::plan
