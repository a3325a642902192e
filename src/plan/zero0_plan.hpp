// The parameters of a 16-bit run without ZeRO whose model file keeps fp32 masters
// (checkpoint/zero0_masters.hpp), in module order (docs/parallel-checkpoints.md §6): a parameter
// with a master is trainable and written from the master; one without is frozen and written from
// its 16-bit module copy; a later name of an earlier entry's bytes is an alias of that entry,
// as at the ZeRO stages. Buffers are not parameters and are not listed. Pure.
#pragma once

#include <string>
#include <vector>

#include "checkpoint/parallel_meta.hpp"
#include "plan/tensor_plan.hpp"

namespace z2f::plan {

struct Zero0Param {
    std::string name;
    checkpoint::TensorRef source;              // the master, or the frozen parameter's module copy
    TensorRole role = TensorRole::kTrainable;  // kTrainable, kFrozen or kAlias
    std::string owner;                         // kAlias: the name that holds the bytes
};

std::vector<Zero0Param> zero0_parameters(const checkpoint::ModelStatesInfo& model,
                                         const checkpoint::Zero0Masters& masters);

}  // namespace z2f::plan
