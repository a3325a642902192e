// The tensors of a universal checkpoint (docs/universal-checkpoint.md §2): for every trainable
// parameter, in param_shapes order (one name per tied set, the owner), its fp32 master weight and
// Adam's exp_avg and exp_avg_sq, each whole and without any data-parallel padding, in float32.
// Pure: a function of the assembled metadata, like plan_consolidation, whose extents formulas it
// reuses on each stream (consolidation.hpp).
//
// Shapes are those the files store: stage 1/2 the parameter's full shape, a 0-dim parameter as
// (1,) (DeepSpeed's loader chunks every `param` and cannot take a 0-dim tensor); stage 3 the flat
// 1-D (numel,) that its loader views as it likes.
//
// Everything a universal checkpoint needs from the source is checked here, before any file is
// laid out: every rank's moments of every flat group, the Adam step of every group (equal on every
// rank), param_groups with one entry per param group (stage 1/2: the loader zips them with its
// own groups and silently skips the surplus), parameter names usable as folder names.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_meta.hpp"
#include "plan/tensor_plan.hpp"

namespace z2f::plan {

struct UniversalParam {
    std::string name;       // the param_shapes name: its folder zero/<name>/
    std::size_t group = 0;  // its flat group in param_shapes (stage 1/2: step.pt takes its step)
    // Index in UniversalPlan::plan.tensors of its fp32, exp_avg and exp_avg_sq tensors (in the
    // order of plan::Stream).
    std::array<std::uint32_t, 3> tensors{};
};

struct UniversalPlan {
    TensorPlan plan;  // three tensors per parameter, named "<name>/fp32", "<name>/exp_avg", ...
    std::vector<UniversalParam> params;
    std::vector<std::string> warnings;
    std::vector<std::string> notes;
};

UniversalPlan plan_universal(const checkpoint::CheckpointMeta& meta);

// Throws an input error unless `name` can be a folder name on every file system we write to:
// not empty, not "." or "..", no '/' and no NUL.
void check_universal_param_name(const std::string& name, const std::string& origin);

}  // namespace z2f::plan
