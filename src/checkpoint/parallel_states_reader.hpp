// Interpretation of the pickles that only parallel checkpoints have, or of the keys that only
// they use (docs/parallel-checkpoints.md §2-§5):
//   model-states   universal_checkpoint_info (Megatron-DeepSpeed's client state, or AutoTP's),
//                  num_experts, `optimizer` as a plain torch optimizer.state_dict() (no ZeRO);
//                  Megatron's `args` (an argparse.Namespace) loads as an inert object and is
//                  never read
//   optimizer      param_groups' `name` / `moe` and param_slice_mappings (name ->
//                  fragment_address(numel, start) per group: where each parameter's slice sits
//                  in this rank's partition; MoE expert groups name local experts)
//   layer, expert  a plain state dict name -> tensor
// The data-parallel keys of the same files are read by states_reader.
#pragma once

#include <cstdint>

#include "checkpoint/parallel_meta.hpp"
#include "container/torch_file.hpp"

namespace z2f::checkpoint {

ParallelModelExtras read_parallel_model_extras(const container::TorchFile& file);
ParallelOptimExtras read_parallel_optim_extras(const container::TorchFile& file);
// A pipeline layer file or a MoE expert file. Non-tensor entries are skipped (AutoEP adds a
// metadata dict); the top level must be a dict.
StateDictInfo read_state_dict_file(const container::TorchFile& file, std::uint32_t file_index);

}  // namespace z2f::checkpoint
