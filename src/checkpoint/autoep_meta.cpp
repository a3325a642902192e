#include "checkpoint/autoep_meta.hpp"

#include <set>

#include "checkpoint/field.hpp"
#include "common/errors.hpp"

namespace z2f::checkpoint {
namespace {

constexpr std::size_t kMinString = 8;

std::int64_t required_int(const Field& entry, std::string_view key) {
    Field value = entry.at(key);
    if (!value.value().is_int()) {
        value.fail("an int");
    }
    return value.as_int();
}

std::uint64_t positive_int(const Field& entry, std::string_view key) {
    const std::int64_t value = required_int(entry, key);
    if (value < 1) {
        entry.at(key).fail("a positive int");
    }
    return static_cast<std::uint64_t>(value);
}

std::string required_name(const Field& entry, std::string_view key) {
    Field value = entry.at(key);
    std::string text = value.as_string();
    if (text.empty()) {
        value.fail("a non-empty string");
    }
    return text;
}

AutoEpLayer read_layer(const Field& entry) {
    if (!entry.is_dict()) {
        entry.fail("an AutoEP layer dict");
    }
    AutoEpLayer layer;
    layer.moe_layer_id = required_int(entry, "moe_layer_id");
    layer.module_path = required_name(entry, "module_path");
    layer.expert_key_prefix = required_name(entry, "expert_key_prefix");
    layer.num_experts = positive_int(entry, "num_experts");
    layer.num_local_experts = positive_int(entry, "num_local_experts");
    layer.ep_size = positive_int(entry, "ep_size");
    if (layer.num_experts % layer.ep_size != 0 ||
        layer.num_experts / layer.ep_size != layer.num_local_experts) {
        entry.at("num_experts")
            .fail("num_local_experts (" + std::to_string(layer.num_local_experts) +
                  ") x ep_size (" + std::to_string(layer.ep_size) + ")");
    }
    if (std::optional<Field> format = entry.find("checkpoint_format");
        format && !format->is_none()) {
        layer.zero3_partitioned = format->as_string() == "zero3_partitioned";
    }
    auto optional_rank = [&](std::string_view key) -> std::int64_t {
        std::optional<Field> value = entry.find(key);
        if (!value || value->is_none()) {
            if (layer.zero3_partitioned) {
                entry.at(key);  // names the missing key
            }
            return -1;
        }
        if (!value->value().is_int() || value->as_int() < 0) {
            value->fail("a non-negative int");
        }
        return value->as_int();
    };
    layer.ep_rank = optional_rank("ep_rank");
    layer.expert_data_parallel_rank = optional_rank("expert_data_parallel_rank");
    layer.expert_data_parallel_world_size = optional_rank("expert_data_parallel_world_size");
    if (layer.ep_rank >= 0 && static_cast<std::uint64_t>(layer.ep_rank) >= layer.ep_size) {
        entry.at("ep_rank").fail("an expert-parallel rank below ep_size " +
                                 std::to_string(layer.ep_size));
    }
    if (layer.expert_data_parallel_rank >= 0 &&
        layer.expert_data_parallel_rank >= layer.expert_data_parallel_world_size) {
        entry.at("expert_data_parallel_rank").fail("a rank below expert_data_parallel_world_size");
    }
    if (layer.zero3_partitioned) {
        if (required_int(entry, "checkpoint_format_version") != 1) {
            entry.at("checkpoint_format_version")
                .fail("format version 1 (the only partition-native layout known)");
        }
        if (layer.expert_data_parallel_world_size < 1) {
            entry.at("expert_data_parallel_world_size").fail("a positive int");
        }
        // The experts a rank holds are the contiguous block of its expert-parallel rank.
        const std::uint64_t start =
            static_cast<std::uint64_t>(layer.ep_rank) * layer.num_local_experts;
        if (required_int(entry, "global_expert_start") != static_cast<std::int64_t>(start) ||
            required_int(entry, "global_expert_end") !=
                static_cast<std::int64_t>(start + layer.num_local_experts)) {
            entry.at("global_expert_start")
                .fail("the expert range [" + std::to_string(start) + ", " +
                      std::to_string(start + layer.num_local_experts) + ") of ep_rank " +
                      std::to_string(layer.ep_rank));
        }
    }
    return layer;
}

}  // namespace

bool AutoEpInfo::zero3_partitioned() const noexcept {
    for (const AutoEpLayer& layer : layers) {
        if (layer.zero3_partitioned)
            return true;
    }
    return false;
}

AutoEpInfo read_autoep_info(const Field& root) {
    AutoEpInfo info;
    std::optional<Field> layers = root.find("ds_autoep_layers");
    if (!layers || layers->is_none()) {
        layers = root.find("autoep_layers");
    }
    if (!layers || layers->is_none()) {
        return info;
    }
    if (!layers->is_list_like()) {
        layers->fail("a list of AutoEP layer dicts");
    }
    std::set<std::int64_t> ids;
    std::set<std::string> prefixes;
    for (const Field& entry : layers->elements()) {
        AutoEpLayer layer = read_layer(entry);
        if (!ids.insert(layer.moe_layer_id).second) {
            entry.at("moe_layer_id").fail("a moe_layer_id no other layer has");
        }
        if (!prefixes.insert(layer.expert_key_prefix).second) {
            entry.at("expert_key_prefix").fail("an expert_key_prefix no other layer has");
        }
        info.layers.push_back(std::move(layer));
    }
    if (info.layers.empty()) {
        layers->fail("at least one AutoEP layer");
    }
    if (std::optional<Field> config = root.find("ds_config"); config && config->is_dict()) {
        if (std::optional<Field> order = config->find("use_data_before_expert_parallelism");
            order && !order->is_none()) {
            if (!order->value().is_bool()) {
                order->fail("a bool");
            }
            info.data_before_expert_parallel = order->value().as_bool();
        }
    }
    return info;
}

std::vector<ZeroPartitionGroup> read_zero_partition_groups(const Field& optimizer_state_dict) {
    std::vector<ZeroPartitionGroup> out;
    std::optional<Field> groups = optimizer_state_dict.find("ds_zero_partition_groups");
    if (!groups || groups->is_none()) {
        return out;
    }
    if (!groups->is_list_like()) {
        groups->fail("a list of partition group dicts");
    }
    for (const Field& group : groups->elements()) {
        if (!group.is_dict()) {
            group.fail("a partition group dict");
        }
        ZeroPartitionGroup entry;
        if (std::optional<Field> count = group.find("partition_count")) {
            entry.count = count->as_int();
            if (entry.count < 1) {
                count->fail("a positive int");
            }
        }
        if (std::optional<Field> rank = group.find("partition_rank")) {
            entry.rank = rank->as_int();
            if (entry.rank < 0 || (entry.count > 0 && entry.rank >= entry.count)) {
                rank->fail("a rank below partition_count");
            }
        }
        if (std::optional<Field> ranks = group.find("partition_ranks");
            ranks && !ranks->is_none()) {
            for (const Field& rank : ranks->elements()) {
                const std::int64_t value = rank.as_int();
                if (value < 0) {
                    rank.fail("a non-negative rank");
                }
                entry.ranks.push_back(static_cast<std::uint64_t>(value));
            }
            if (entry.count > 0 && entry.ranks.size() != static_cast<std::uint64_t>(entry.count)) {
                ranks->fail("partition_count (" + std::to_string(entry.count) + ") ranks");
            }
        }
        if (std::optional<Field> families = group.find("families");
            families && !families->is_none()) {
            for (const Field& family : families->elements()) {
                entry.families.push_back(family.as_string());
            }
        }
        out.push_back(std::move(entry));
    }
    return out;
}

const AutoEpLayer* autoep_layer_of(const std::vector<AutoEpLayer>& layers,
                                   const std::string& name) {
    for (const AutoEpLayer& layer : layers) {
        const std::string& prefix = layer.expert_key_prefix;
        if (name.size() > prefix.size() + 1 && name.starts_with(prefix) &&
            name[prefix.size()] == '.' && name.find('.', prefix.size() + 1) == std::string::npos) {
            return &layer;
        }
    }
    return nullptr;
}

void put_autoep_info(WireWriter& out, const AutoEpInfo& info) {
    out.sequence(info.layers, [](WireWriter& w, const AutoEpLayer& layer) {
        w.i64(layer.moe_layer_id);
        w.str(layer.module_path);
        w.str(layer.expert_key_prefix);
        w.u64(layer.num_experts);
        w.u64(layer.num_local_experts);
        w.u64(layer.ep_size);
        w.boolean(layer.zero3_partitioned);
        w.i64(layer.ep_rank);
        w.i64(layer.expert_data_parallel_rank);
        w.i64(layer.expert_data_parallel_world_size);
    });
    out.boolean(info.data_before_expert_parallel);
}

AutoEpInfo get_autoep_info(WireReader& in) {
    AutoEpInfo info;
    info.layers = in.sequence(8 + 2 * kMinString + 3 * 8 + 1 + 3 * 8, [](WireReader& r) {
        AutoEpLayer layer;
        layer.moe_layer_id = r.i64();
        layer.module_path = r.str();
        layer.expert_key_prefix = r.str();
        layer.num_experts = r.u64();
        layer.num_local_experts = r.u64();
        layer.ep_size = r.u64();
        layer.zero3_partitioned = r.boolean();
        layer.ep_rank = r.i64();
        layer.expert_data_parallel_rank = r.i64();
        layer.expert_data_parallel_world_size = r.i64();
        return layer;
    });
    info.data_before_expert_parallel = in.boolean();
    return info;
}

void put_partition_groups(WireWriter& out, const std::vector<ZeroPartitionGroup>& groups) {
    out.sequence(groups, [](WireWriter& w, const ZeroPartitionGroup& group) {
        w.i64(group.count);
        w.i64(group.rank);
        w.dims(group.ranks);
        w.strings(group.families);
    });
}

std::vector<ZeroPartitionGroup> get_partition_groups(WireReader& in) {
    return in.sequence(2 * 8 + 2 * 8, [](WireReader& r) {
        ZeroPartitionGroup group;
        group.count = r.i64();
        group.rank = r.i64();
        group.ranks = r.dims();
        group.families = r.strings();
        return group;
    });
}

}  // namespace z2f::checkpoint
