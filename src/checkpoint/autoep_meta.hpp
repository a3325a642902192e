// What an AutoEP checkpoint says about its expert layers (docs/parallel-checkpoints.md §5.2) and
// what a ZeRO-3 optimizer file says about the partition group of each sub-group.
//
// AutoEP replaces each MoE block at `module_path` by a layer whose experts are fused: one
// parameter `<expert_key_prefix>.<w>` of shape [num_local_experts, ...] per weight, holding the
// experts of one expert-parallel rank. Every model-states file records the layers as
// `ds_autoep_layers` (legacy spelling `autoep_layers`), a list of dicts:
//
//   moe_layer_id, module_path, expert_key_prefix, num_experts, num_local_experts, ep_size
//                                           always (num_experts = num_local_experts * ep_size)
//   checkpoint_format                       'per_expert_files' (ZeRO-0/1/2: the experts'
//                                           weights also in layer_<L>_expert_<E>_* files) or
//                                           'zero3_partitioned' (ZeRO-3: only in the partitions)
//   checkpoint_format_version (1), ep_rank, expert_data_parallel_rank,
//   expert_data_parallel_world_size, global_expert_start/end
//                                           the saving rank's place; required with
//                                           zero3_partitioned, where each rank's file has its own
//
// The model file's ds_config may hold `use_data_before_expert_parallelism` (a bool): which
// ranks share an expert-parallel rank at ZeRO-1/2 (autoep_grid.hpp).
//
// A ZeRO-3 optimizer file of AutoEP records, per sub-group, `ds_zero_partition_groups[j]`: the
// group's `partition_count`, this rank's `partition_rank` in it, the global `partition_ranks`
// and the `families` of its parameters ('replicated' dense, 'autoep_expert').
//
// Every field read is checked: a malformed entry is an input error naming the file and the path
// of the value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/wire_codec.hpp"

namespace z2f::checkpoint {

class Field;

struct AutoEpLayer {
    std::int64_t moe_layer_id = 0;
    std::string module_path;
    std::string expert_key_prefix;
    std::uint64_t num_experts = 0;
    std::uint64_t num_local_experts = 0;
    std::uint64_t ep_size = 0;
    bool zero3_partitioned = false;
    // The saving rank's place, -1 where the entry does not record it (required when
    // zero3_partitioned).
    std::int64_t ep_rank = -1;
    std::int64_t expert_data_parallel_rank = -1;
    std::int64_t expert_data_parallel_world_size = -1;

    friend bool operator==(const AutoEpLayer&, const AutoEpLayer&) = default;
};

struct AutoEpInfo {
    std::vector<AutoEpLayer> layers;  // empty: not an AutoEP checkpoint
    // ds_config['use_data_before_expert_parallelism']; false when absent.
    bool data_before_expert_parallel = false;

    bool present() const noexcept { return !layers.empty(); }
    bool zero3_partitioned() const noexcept;
    friend bool operator==(const AutoEpInfo&, const AutoEpInfo&) = default;
};

// One ds_zero_partition_groups entry (-1 / empty where absent).
struct ZeroPartitionGroup {
    std::int64_t count = -1;
    std::int64_t rank = -1;
    std::vector<std::uint64_t> ranks;
    std::vector<std::string> families;

    friend bool operator==(const ZeroPartitionGroup&, const ZeroPartitionGroup&) = default;
};

// From a model-states file's top-level dict; empty layers when it records none.
AutoEpInfo read_autoep_info(const Field& root);
// From an optimizer file's optimizer_state_dict; empty when it records none.
std::vector<ZeroPartitionGroup> read_zero_partition_groups(const Field& optimizer_state_dict);

// The layer whose expert_key_prefix is the start of `name` followed by '.' and one more name
// component (a fused expert weight such as '<prefix>.w1'), or nullptr.
const AutoEpLayer* autoep_layer_of(const std::vector<AutoEpLayer>& layers, const std::string& name);

void put_autoep_info(WireWriter& out, const AutoEpInfo& info);
AutoEpInfo get_autoep_info(WireReader& in);
void put_partition_groups(WireWriter& out, const std::vector<ZeroPartitionGroup>& groups);
std::vector<ZeroPartitionGroup> get_partition_groups(WireReader& in);

}  // namespace z2f::checkpoint
