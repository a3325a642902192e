// The pickled objects of a synthetic checkpoint's files, shaped key for key like DeepSpeed's
// (docs/deepspeed-format.md §3, §4; compare with zero2fp32-inspect on tests/data/deepspeed):
//
// model states (engine._save_checkpoint), one plain dict, keys in this order:
//   module               OrderedDict name -> tensor, with a BUILD of {'_metadata': ...}
//                        stage 2: trainable params are views into one flat model-dtype buffer
//                        per param group (aligned_g elements, padding included); frozen params
//                        and buffers have their own storages; a tied alias views its owner
//                        stage 3: every param is an empty [0] placeholder with its own storage
//                        (a tied alias shares its owner's); buffers are full
//   buffer_names         list of persistent buffer names
//   optimizer            None
//   param_shapes         list (per group / sub-group) of OrderedDict name -> torch.Size
//   frozen_param_shapes  OrderedDict name -> torch.Size (empty when nothing is frozen)
//   shared_params        dict alias -> owner
//   frozen_param_fragments  OrderedDict name -> tensor: stage 2 the full tensor (the same
//                        storage as its module entry), stage 3 this rank's padded 1-D slot
//   lr_scheduler, data_sampler, random_ltd  None
//   sparse_tensor_module_names  set()
//   skipped_steps 0, global_steps 2, global_samples 2W, dp_world_size W, mp_world_size 1
//   ds_config, ds_version
//
// optimizer states (engine._save_zero_checkpoint): {optimizer_state_dict, ds_config,
// ds_version}, where optimizer_state_dict is
//   stage 2: loss_scaler, dynamic_loss_scale, overflow, clip_grad, base_optimizer_state
//            ({state: {g: {step, exp_avg, exp_avg_sq}}, param_groups}),
//            single_partition_of_fp32_groups (views [:P-pad] of P-element storages),
//            zero_stage, group_paddings, partition_count (list), ds_version,
//            param_slice_mappings (OrderedDict name -> fragment_address per group)
//   stage 3: zero_stage, loss_scaler, dynamic_loss_scale, overflow, partition_count (int),
//            optimizer_state_dict ({state: {j: {...}}, param_groups}), fp32_flat_groups
// Without moments, `state` is an empty dict (an optimizer that has not stepped yet).
//
// Storage keys are numbered in pickling order, as torch.save's persistent_id does; the
// records are listed in the order torch writes them (keys sorted as strings).
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "synth/record_content.hpp"
#include "synth/synth_options.hpp"

namespace z2f::synth {

struct StorageRecord {
    std::string key;  // the record is data/<key>
    RecordContent content;
};

struct PickledFile {
    std::vector<std::byte> pickle;
    std::vector<StorageRecord> records;  // torch's record order
};

PickledFile model_states_pickle(const SynthContext& context, std::uint32_t rank);
PickledFile optim_states_pickle(const SynthContext& context, std::uint32_t rank);

}  // namespace z2f::synth
