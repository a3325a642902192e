// The Adam state and the global optimizer scalars of an optimizer-states file, which only a
// universal checkpoint needs (docs/universal-checkpoint.md §2, §4). Where they live:
//
//   stage 1/2, BF16_Optimizer   optimizer_state_dict.base_optimizer_state
//       torch form (default)    {'state': {k: {'step', 'exp_avg', 'exp_avg_sq'}},
//                                'param_groups': [{..., 'params': [k]}]}: group g's state is
//                               state[param_groups[g]['params'][0]] (k = g in practice); its
//                               moments cover the whole padded partition P_g
//       elastic form            [ {'exp_avg', 'exp_avg_sq'[, 'step']} per group ], padding
//                               stripped like the masters; the step may sit in
//                               optimizer_state_dict.base_optimizer_state_step; no param_groups
//   stage 3                     optimizer_state_dict.optimizer_state_dict =
//                               {'state': {j: {...}}, 'param_groups': [...]}: sub-group j's
//                               moments, laid out like fp32_flat_groups[j]
//
// Absent or differently shaped containers leave the state absent (nullopt): HF conversion never
// needs it. Tensors that are present must be 1-D floating tensors inside their records; the
// step must be a 0-dim (or one-element) tensor of at most 8 bytes, or a number.
#pragma once

#include <cstdint>

#include "checkpoint/checkpoint_meta.hpp"
#include "checkpoint/field.hpp"

namespace z2f::checkpoint {

// Fills info.group_states and info.global_state. `osd` is the file's optimizer_state_dict;
// info.layout and info.master must already be read.
void read_optimizer_state(const Field& osd, std::uint32_t file_index, OptimStatesInfo& info);

}  // namespace z2f::checkpoint
