// An AutoEP checkpoint (autoep_meta.hpp) cut into data-parallel checkpoints that the ZeRO rules
// of plan_consolidation can take one by one (docs/parallel-checkpoints.md §5.2):
//
//   dense      every rank's dense flat groups (partitioned over all W ranks), with the model
//              file's buffers, frozen parameters and ties
//   experts    for every expert flat group and expert-parallel rank e, the group's partitions
//              of the ranks that hold e's experts (its expert-data-parallel ranks, in their
//              partition order), whose parameters are e's fused local experts
//              [num_local_experts, ...]
//
// A flat group is an expert group when every parameter it holds is a fused expert weight
// '<expert_key_prefix>.<w>' of a layer, a dense group when none is; anything else is refused.
// Which ranks hold expert-parallel rank e:
//   ZeRO-1/2  DeepSpeed's expert groups (only rank 0's place is recorded): with
//             use_data_before_expert_parallelism false (the default) ranks e, e + EP, e + 2 EP,
//             ... in that order; with it true the block e * (W / EP) ... (e + 1) * (W / EP) - 1.
//             The group's partition_count must be W / EP.
//   ZeRO-3    recorded: each rank's model file names its ep_rank per layer, its optimizer file
//             the sub-group's partition group (count, this rank's partition_rank, the ranks).
//             Every expert-parallel rank must have partition ranks 0..count-1 exactly once,
//             count = expert_data_parallel_world_size, the same member list, and all layers of
//             a sub-group must agree on each rank's ep_rank; dense sub-groups must be
//             partitioned over all W ranks with partition_rank = the file's rank.
//
// The router alias: an AutoEP layer keeps its router module `router` and, for the model's own
// code, registers the same module again under the name the model gave its gate (a Mixtral
// 'gate'). The state dict then lists every router tensor twice, and DeepSpeed records no tie
// (shared_params holds none). A child X of a layer's module_path whose entries in `module`
// mirror the router's, name for name (and shape for shape where both are stored), and that
// nothing else accounts for, is taken as that alias: tied to the router's tensors.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/checkpoint_meta.hpp"
#include "checkpoint/parallel_meta.hpp"

namespace z2f::checkpoint {

struct AutoEpExpertView {
    std::size_t group = 0;  // the flat group (sub-group) in the checkpoint's param_shapes
    std::uint64_t ep_rank = 0;
    std::vector<std::uint32_t> members;  // training ranks, in partition order
    CheckpointMeta view;
};

struct AutoEpViews {
    // Every rank with every flat group: the optimizer files' global state and steps.
    CheckpointMeta whole;
    CheckpointMeta dense;
    std::vector<AutoEpExpertView> experts;  // by group, then expert-parallel rank
    std::vector<AutoEpLayer> layers;
    std::uint32_t world = 0;  // W: ranks of the data-parallel grid
    std::uint32_t ep_size = 0;
    bool zero3 = false;
    std::string origin;  // the model file recording the layers, for messages
};

// ZeRO-3 partition-native: the data-parallel reader's assembled checkpoint.
AutoEpViews autoep_views(const CheckpointMeta& meta);
// ZeRO-1/2 with per-expert files: the parallel reader's (TP = PP = 1); the expert files are
// checked against the expert groups (every expert of every layer, one weight per fused
// parameter, its shape that of one local expert).
AutoEpViews autoep_views(const ParallelCheckpointMeta& meta);

// The router aliases (alias -> owner) of the header comment, in `module` order.
std::vector<std::pair<std::string, std::string>> infer_router_aliases(
    const ModelStatesInfo& model, const std::vector<AutoEpLayer>& layers);

// The expert-parallel rank of training rank `rank` at ZeRO-1/2 and its place among the ranks
// sharing it (DeepSpeed's expert groups; see the header comment).
struct ExpertPlace {
    std::uint32_t ep_rank = 0;
    std::uint32_t edp_rank = 0;
};
ExpertPlace zero12_expert_place(std::uint32_t rank, std::uint32_t world, std::uint32_t ep_size,
                                bool data_before_expert_parallel);

}  // namespace z2f::checkpoint
