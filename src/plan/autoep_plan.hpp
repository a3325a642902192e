// The consolidation plan of an AutoEP checkpoint (docs/parallel-checkpoints.md §5.2), from its
// data-parallel views (checkpoint/autoep_views.hpp). Pure.
//
//   dense    the dense view consolidated by the ZeRO rules (plan_consolidation): buffers,
//            frozen parameters, trainable parameters and ties, the router aliases included
//   experts  every fused expert weight '<expert_key_prefix>.<w>' whole, as the model names
//            it: expert-parallel rank e's local tensor [num_local_experts, ...] (its view
//            consolidated by the same rules) is rows e * num_local_experts ... of the full
//            [num_experts, ...] tensor; global expert id = e * num_local_experts + local id.
//            Each rank's tensor is one piece, cut along dimension 0 (tp_merge's cat).
//
// Order: the dense tensors in their order, each layer's fused weights (in param_shapes order)
// right after the last tensor of its module_path; a layer whose module has no dense tensor goes
// after the trainable ones; tied aliases last.
#pragma once

#include "checkpoint/autoep_views.hpp"
#include "plan/consolidation.hpp"
#include "plan/parallel_plan.hpp"

namespace z2f::plan {

PiecedPlan plan_autoep_consolidation(const checkpoint::AutoEpViews& views,
                                     const PlanOptions& options);

}  // namespace z2f::plan
