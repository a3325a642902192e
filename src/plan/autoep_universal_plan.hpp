// The universal checkpoint of an AutoEP checkpoint (docs/universal-checkpoint.md §11), as
// DeepSpeed's ds_to_universal.py writes it: every dense parameter as for the data-parallel
// checkpoint it is (ZeRO-1/2 {'cat_dim': 0, 'param': T} and step.pt, ZeRO-3 the flat tensor),
// every fused expert weight whole, [num_experts, ...], in a dict
// {'param': T, 'cat_dim': 0, 'is_expert_param': True, 'ep_num_experts': N} (and, at ZeRO-1/2,
// step.pt) from which the resuming run takes its expert-parallel rank's rows. The three streams
// of each parameter come from plan_autoep_consolidation; optimizer_state.pt from rank 0's
// optimizer file (AutoEpViews::whole); the model-states files are copied (the mp_rank file at
// ZeRO-1/2, every rank's at ZeRO-3, never the expert files). Pure.
#pragma once

#include "checkpoint/autoep_views.hpp"
#include "plan/universal_plan.hpp"

namespace z2f::plan {

UniversalPlan plan_autoep_universal(const checkpoint::AutoEpViews& views);

}  // namespace z2f::plan
