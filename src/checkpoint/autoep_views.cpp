#include "checkpoint/autoep_views.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "common/errors.hpp"

namespace z2f::checkpoint {
namespace {

std::string list_text(const std::vector<std::uint32_t>& ranks) {
    std::string out;
    for (std::uint32_t r : ranks)
        out += (out.empty() ? "" : ", ") + std::to_string(r);
    return "[" + out + "]";
}

enum class GroupKind : std::uint8_t { kDense, kExperts };

// Dense or expert, from the names a flat group holds (an empty group counts as dense).
GroupKind classify_group(const std::vector<NamedShape>& group, std::size_t g,
                         const std::vector<AutoEpLayer>& layers, const std::string& origin) {
    std::size_t experts = 0;
    for (const NamedShape& shape : group) {
        if (autoep_layer_of(layers, shape.name) != nullptr)
            ++experts;
    }
    if (experts == 0)
        return GroupKind::kDense;
    if (experts != group.size()) {
        throw_input_error(origin, "flat group " + std::to_string(g) +
                                      " of param_shapes mixes fused AutoEP expert weights with "
                                      "other parameters: experts and dense parameters are "
                                      "partitioned over different ranks, so no group holds both");
    }
    return GroupKind::kExperts;
}

// Every fused expert weight's local shape: [num_local_experts, ...].
void check_local_shapes(const std::vector<NamedShape>& group,
                        const std::vector<AutoEpLayer>& layers, const std::string& origin) {
    for (const NamedShape& shape : group) {
        const AutoEpLayer* layer = autoep_layer_of(layers, shape.name);
        if (shape.shape.empty() || shape.shape.front() != layer->num_local_experts) {
            throw_input_error(origin, "fused expert weight '" + shape.name +
                                          "' does not start with its layer's " +
                                          std::to_string(layer->num_local_experts) +
                                          " local experts (num_local_experts)");
        }
    }
}

// A data-parallel checkpoint of `members` (training ranks) holding the flat groups `groups` of
// `meta`, whose model facts are `model` (the first model file's, or nothing for experts).
CheckpointMeta sub_view(const CheckpointMeta& meta, const std::vector<std::uint32_t>& members,
                        const std::vector<std::size_t>& groups, ModelStatesInfo model,
                        bool with_frozen) {
    CheckpointMeta view;
    view.files = meta.files;
    view.files.optim_files.clear();
    view.inputs = meta.inputs;
    view.input_sizes = meta.input_sizes;
    view.records = meta.records;
    view.world_size = static_cast<std::uint32_t>(members.size());
    view.zero_stage = meta.zero_stage;
    view.layout = meta.layout;
    view.ds_version = meta.ds_version;
    std::vector<std::vector<NamedShape>> shapes;
    for (std::size_t g : groups)
        shapes.push_back(meta.model.param_shapes->at(g));
    model.param_shapes = std::move(shapes);
    if (!with_frozen)
        model.frozen_param_shapes.reset();
    view.model = std::move(model);
    if (meta.files.per_rank_model_files) {
        view.files.model_files.clear();
        for (std::uint32_t r : members) {
            view.files.model_files.push_back(meta.files.model_files.at(r));
            view.frozen_fragments_by_rank.push_back(
                with_frozen ? meta.frozen_fragments_by_rank.at(r) : std::vector<NamedTensor>{});
        }
    } else {
        view.frozen_fragments_by_rank.push_back(with_frozen ? meta.frozen_fragments_by_rank.at(0)
                                                            : std::vector<NamedTensor>{});
    }
    for (std::uint32_t r : members) {
        view.files.optim_files.push_back(meta.files.optim_files.at(r));
        const OptimStatesInfo& source = meta.optim.at(r);
        OptimStatesInfo optim = source;
        optim.master.clear();
        optim.group_states.clear();
        optim.partition_count.clear();
        optim.partition_groups.clear();
        for (std::size_t g : groups) {
            optim.master.push_back(source.master.at(g));
            if (g < source.group_states.size())
                optim.group_states.push_back(source.group_states[g]);
        }
        if (optim.group_states.size() != optim.master.size())
            optim.group_states.clear();  // some group without state: none (refused when needed)
        optim.partition_count.assign(
            meta.layout == MasterLayout::kPerParam ? std::size_t{1} : groups.size(),
            static_cast<std::int64_t>(members.size()));
        view.optim.push_back(std::move(optim));
    }
    return view;
}

// What an expert view's model file says: nothing but the (empty) lists the rules ask for.
ModelStatesInfo expert_model(const ModelStatesInfo& first) {
    ModelStatesInfo model;
    model.ds_version = first.ds_version;
    model.has_buffer_names = true;
    model.shared_params.emplace();
    return model;
}

// The dense view's model facts: the first model file's, its ties completed by the router
// aliases.
ModelStatesInfo dense_model(const ModelStatesInfo& first, const std::vector<AutoEpLayer>& layers) {
    ModelStatesInfo model = first;
    std::vector<std::pair<std::string, std::string>> ties =
        model.shared_params.value_or(std::vector<std::pair<std::string, std::string>>{});
    std::unordered_set<std::string> tied;
    for (const auto& [alias, owner] : ties)
        tied.insert(alias);
    for (auto& pair : infer_router_aliases(first, layers)) {
        if (tied.insert(pair.first).second)
            ties.push_back(std::move(pair));
    }
    model.shared_params = std::move(ties);
    return model;
}

std::uint32_t ep_size_of(const std::vector<AutoEpLayer>& layers, const std::string& origin) {
    const std::uint64_t ep = layers.front().ep_size;
    for (const AutoEpLayer& layer : layers) {
        if (layer.ep_size != ep) {
            throw_unsupported(origin, "AutoEP layers of different expert-parallel sizes (" +
                                          std::to_string(ep) + " and " +
                                          std::to_string(layer.ep_size) + ")");
        }
    }
    return static_cast<std::uint32_t>(ep);
}

// Frozen fused expert weights: DeepSpeed keeps no master for them.
void refuse_frozen_experts(const ModelStatesInfo& model, const std::vector<AutoEpLayer>& layers,
                           const std::string& origin) {
    if (!model.frozen_param_shapes)
        return;
    for (const NamedShape& shape : *model.frozen_param_shapes) {
        if (autoep_layer_of(layers, shape.name) != nullptr) {
            throw_unsupported(origin, "frozen AutoEP expert weight '" + shape.name +
                                          "': how its partitions are laid out over the expert "
                                          "groups is not recorded (DeepSpeed's converters "
                                          "refuse it too)");
        }
    }
}

}  // namespace

ExpertPlace zero12_expert_place(std::uint32_t rank, std::uint32_t world, std::uint32_t ep_size,
                                bool data_before_expert_parallel) {
    const std::uint32_t edp = world / ep_size;
    if (data_before_expert_parallel)
        return {rank / edp, rank % edp};
    return {rank % ep_size, rank / ep_size};
}

std::vector<std::pair<std::string, std::string>> infer_router_aliases(
    const ModelStatesInfo& model, const std::vector<AutoEpLayer>& layers) {
    std::unordered_set<std::string> known(model.buffer_names.begin(), model.buffer_names.end());
    if (model.param_shapes) {
        for (const auto& group : *model.param_shapes) {
            for (const NamedShape& shape : group)
                known.insert(shape.name);
        }
    }
    if (model.frozen_param_shapes) {
        for (const NamedShape& shape : *model.frozen_param_shapes)
            known.insert(shape.name);
    }
    if (model.shared_params) {
        for (const auto& [alias, owner] : *model.shared_params)
            known.insert(alias);
    }
    std::vector<std::pair<std::string, std::string>> out;
    for (const AutoEpLayer& layer : layers) {
        const std::string base = layer.module_path + ".";
        const std::string router = base + "router.";
        // rest -> the router's entry; child -> its entries (rest, tensor) in module order.
        std::map<std::string, const NamedTensor*> routed;
        std::map<std::string, std::vector<std::pair<std::string, const NamedTensor*>>> children;
        std::vector<std::string> child_order;
        for (const NamedTensor& entry : model.module_tensors) {
            if (entry.name.starts_with(router)) {
                routed.emplace(entry.name.substr(router.size()), &entry);
                continue;
            }
            if (!entry.name.starts_with(base) || known.count(entry.name) != 0)
                continue;
            const std::string tail = entry.name.substr(base.size());
            const std::size_t dot = tail.find('.');
            if (dot == std::string::npos || dot == 0)
                continue;
            const std::string child = tail.substr(0, dot);
            auto [it, inserted] = children.try_emplace(child);
            if (inserted)
                child_order.push_back(child);
            it->second.emplace_back(tail.substr(dot + 1), &entry);
        }
        if (routed.empty())
            continue;
        for (const std::string& child : child_order) {
            const auto& entries = children.at(child);
            bool mirrors = entries.size() == routed.size();
            for (std::size_t i = 0; mirrors && i < entries.size(); ++i) {
                auto owner = routed.find(entries[i].first);
                const TensorRef& mine = entries[i].second->tensor;
                mirrors =
                    owner != routed.end() && (mine.numel == 0 || owner->second->tensor.numel == 0 ||
                                              mine.shape == owner->second->tensor.shape);
            }
            if (!mirrors)
                continue;
            for (const auto& [rest, entry] : entries)
                out.emplace_back(entry->name, router + rest);
        }
    }
    return out;
}

AutoEpViews autoep_views(const CheckpointMeta& meta) {
    const std::string& origin = meta.files.model_files.front();
    const std::vector<AutoEpLayer>& layers = meta.model.autoep.layers;
    if (layers.empty() || meta.layout != MasterLayout::kPerParam) {
        throw_internal_error("autoep_views: not an AutoEP ZeRO-3 checkpoint");
    }
    AutoEpViews views;
    views.whole = meta;
    views.layers = layers;
    views.world = meta.world_size;
    views.ep_size = ep_size_of(layers, origin);
    views.zero3 = true;
    views.origin = origin;
    if (views.ep_size > meta.world_size) {
        throw_input_error(origin, "records " + std::to_string(views.ep_size) +
                                      " expert-parallel ranks among " +
                                      std::to_string(meta.world_size) + " ranks");
    }
    refuse_frozen_experts(meta.model, layers, origin);
    const auto& shapes = *meta.model.param_shapes;
    const std::uint32_t world = meta.world_size;
    if (meta.autoep_by_rank.size() != world) {
        throw_internal_error("autoep_views: AutoEP layers of " +
                             std::to_string(meta.autoep_by_rank.size()) + " model files for " +
                             std::to_string(world) + " ranks");
    }
    for (std::uint32_t r = 0; r < world; ++r) {
        const OptimStatesInfo& optim = meta.optim[r];
        if (optim.partition_groups.size() != optim.master.size()) {
            throw_input_error(meta.files.optim_files[r],
                              "records " + std::to_string(optim.partition_groups.size()) +
                                  " ds_zero_partition_groups for " +
                                  std::to_string(optim.master.size()) +
                                  " fp32_flat_groups: an AutoEP partition-native checkpoint "
                                  "needs the partition group of every sub-group");
        }
        // Every rank records the same layers; only its own place differs.
        const std::vector<AutoEpLayer>& own = meta.autoep_by_rank[r].layers;
        bool same = own.size() == layers.size();
        for (std::size_t l = 0; same && l < own.size(); ++l) {
            same = own[l].moe_layer_id == layers[l].moe_layer_id &&
                   own[l].expert_key_prefix == layers[l].expert_key_prefix &&
                   own[l].num_experts == layers[l].num_experts &&
                   own[l].ep_size == layers[l].ep_size && own[l].zero3_partitioned &&
                   layers[l].zero3_partitioned;
        }
        if (!same) {
            throw_input_error(meta.files.model_files[r],
                              "ds_autoep_layers differs from " + origin +
                                  "'s (other layers, expert counts or format): every rank of a "
                                  "partition-native AutoEP checkpoint records the same layers");
        }
    }
    if (shapes.size() != meta.optim.front().master.size()) {
        throw_input_error(origin, "param_shapes lists " + std::to_string(shapes.size()) +
                                      " sub-groups but the optimizer files hold " +
                                      std::to_string(meta.optim.front().master.size()) +
                                      ": AutoEP sub-groups are partitioned independently");
    }

    std::vector<std::size_t> dense;
    std::vector<std::uint32_t> all;
    for (std::uint32_t r = 0; r < world; ++r)
        all.push_back(r);
    for (std::size_t j = 0; j < shapes.size(); ++j) {
        if (classify_group(shapes[j], j, layers, origin) == GroupKind::kDense) {
            for (std::uint32_t r = 0; r < world; ++r) {
                const ZeroPartitionGroup& group = meta.optim[r].partition_groups[j];
                if ((group.count >= 0 && group.count != world) ||
                    (group.rank >= 0 && group.rank != static_cast<std::int64_t>(r))) {
                    throw_input_error(meta.files.optim_files[r],
                                      "dense sub-group " + std::to_string(j) +
                                          " is partitioned as rank " + std::to_string(group.rank) +
                                          " of " + std::to_string(group.count) +
                                          ", expected rank " + std::to_string(r) + " of all " +
                                          std::to_string(world));
                }
            }
            dense.push_back(j);
            continue;
        }
        check_local_shapes(shapes[j], layers, origin);
        // The layer of the sub-group's first weight decides every rank's expert-parallel rank;
        // the others must agree.
        std::vector<std::size_t> layer_indices;
        for (const NamedShape& shape : shapes[j]) {
            const AutoEpLayer* layer = autoep_layer_of(layers, shape.name);
            layer_indices.push_back(static_cast<std::size_t>(layer - layers.data()));
        }
        std::map<std::uint64_t, std::vector<std::pair<std::int64_t, std::uint32_t>>> by_ep;
        std::map<std::uint64_t, std::vector<std::uint64_t>> member_lists;
        for (std::uint32_t r = 0; r < world; ++r) {
            const std::vector<AutoEpLayer>& own = meta.autoep_by_rank[r].layers;
            const AutoEpLayer& place = own[layer_indices.front()];
            for (std::size_t l : layer_indices) {
                if (own[l].ep_rank != place.ep_rank) {
                    throw_unsupported(meta.files.model_files[r],
                                      "AutoEP layers of sub-group " + std::to_string(j) +
                                          " place this rank at different expert-parallel ranks");
                }
            }
            const ZeroPartitionGroup& group = meta.optim[r].partition_groups[j];
            if (group.count != place.expert_data_parallel_world_size || group.rank < 0) {
                throw_input_error(meta.files.optim_files[r],
                                  "expert sub-group " + std::to_string(j) +
                                      " is partitioned over " + std::to_string(group.count) +
                                      " ranks, but the model file's AutoEP layer records " +
                                      std::to_string(place.expert_data_parallel_world_size) +
                                      " expert-data-parallel ranks");
            }
            const auto ep = static_cast<std::uint64_t>(place.ep_rank);
            by_ep[ep].emplace_back(group.rank, r);
            auto [it, inserted] = member_lists.emplace(ep, group.ranks);
            if (!inserted && it->second != group.ranks) {
                throw_input_error(meta.files.optim_files[r],
                                  "expert sub-group " + std::to_string(j) +
                                      " names other partition_ranks than the other ranks of "
                                      "expert-parallel rank " +
                                      std::to_string(ep));
            }
        }
        for (std::uint64_t e = 0; e < views.ep_size; ++e) {
            auto it = by_ep.find(e);
            if (it == by_ep.end()) {
                throw_input_error(meta.files.tag_dir,
                                  "no rank holds the experts of expert-parallel "
                                  "rank " +
                                      std::to_string(e) + " (sub-group " + std::to_string(j) + ")");
            }
            std::vector<std::pair<std::int64_t, std::uint32_t>> ranks = it->second;
            std::sort(ranks.begin(), ranks.end());
            std::vector<std::uint32_t> members;
            for (std::size_t d = 0; d < ranks.size(); ++d) {
                if (ranks[d].first != static_cast<std::int64_t>(d)) {
                    throw_input_error(meta.files.optim_files[ranks[d].second],
                                      "expert-parallel rank " + std::to_string(e) +
                                          " of sub-group " + std::to_string(j) +
                                          " lacks partition rank " + std::to_string(d) +
                                          " or has it twice");
                }
                members.push_back(ranks[d].second);
            }
            const std::vector<std::uint64_t>& listed = member_lists.at(e);
            if (!listed.empty() &&
                !std::equal(listed.begin(), listed.end(), members.begin(), members.end())) {
                throw_input_error(meta.files.optim_files[members.front()],
                                  "expert sub-group " + std::to_string(j) +
                                      " lists partition_ranks that are not the ranks " +
                                      list_text(members) + " holding its partitions");
            }
            AutoEpExpertView expert;
            expert.group = j;
            expert.ep_rank = e;
            expert.members = members;
            expert.view = sub_view(meta, members, {j}, expert_model(meta.model), false);
            views.experts.push_back(std::move(expert));
        }
        if (by_ep.size() != views.ep_size) {
            throw_input_error(origin, "ranks of sub-group " + std::to_string(j) +
                                          " name expert-parallel ranks outside 0.." +
                                          std::to_string(views.ep_size - 1));
        }
    }
    views.dense = sub_view(meta, all, dense, dense_model(meta.model, layers), true);
    return views;
}

AutoEpViews autoep_views(const ParallelCheckpointMeta& meta) {
    const ModelParallelRank& rank0 = meta.ranks.front();
    const std::string& origin = meta.grid.model_files.front();
    const std::vector<AutoEpLayer>& layers = rank0.model.states.autoep.layers;
    if (layers.empty() || !meta.zero || meta.ranks.size() != 1) {
        throw_internal_error("autoep_views: not an AutoEP ZeRO-1/2 checkpoint of one model rank");
    }
    // The data-parallel checkpoint of every rank, as the ZeRO-1/2 rules see it.
    CheckpointMeta whole;
    whole.files.checkpoint_dir = meta.grid.folder.checkpoint_dir;
    whole.files.tag = meta.grid.folder.tag;
    whole.files.tag_dir = meta.grid.folder.tag_dir;
    whole.files.model_files = {origin};
    whole.files.optim_files = meta.grid.optim_files.at(0);
    whole.files.optim_prefix = meta.grid.optim_prefix;
    whole.inputs = meta.inputs;
    whole.input_sizes = meta.input_sizes;
    whole.records = meta.records;
    whole.model = rank0.model.states;
    whole.frozen_fragments_by_rank.push_back(whole.model.frozen_param_fragments);
    for (const OptimFile& optim : rank0.optim)
        whole.optim.push_back(optim.states);
    const OptimStatesInfo& first = whole.optim.front();
    whole.layout = first.layout;
    whole.zero_stage =
        first.layout == MasterLayout::kPaddedGroups ? 1 : static_cast<int>(first.zero_stage);
    whole.ds_version = meta.ds_version;
    const auto world = static_cast<std::uint32_t>(whole.optim.size());
    whole.world_size = world;

    AutoEpViews views;
    views.layers = layers;
    views.world = world;
    views.ep_size = ep_size_of(layers, origin);
    views.origin = origin;
    refuse_frozen_experts(whole.model, layers, origin);
    if (!whole.model.param_shapes) {
        throw_input_error(origin,
                          "has no param_shapes: the parameters of the flat groups are "
                          "unknown");
    }
    const auto& shapes = *whole.model.param_shapes;
    for (std::size_t r = 0; r < world; ++r) {
        const OptimStatesInfo& optim = whole.optim[r];
        if (optim.master.size() != shapes.size() ||
            optim.partition_count.size() != optim.master.size()) {
            throw_input_error(whole.files.optim_files[r],
                              "holds " + std::to_string(optim.master.size()) + " flat groups and " +
                                  std::to_string(optim.partition_count.size()) +
                                  " partition counts, param_shapes lists " +
                                  std::to_string(shapes.size()) + " groups");
        }
        if (optim.partition_count != first.partition_count) {
            throw_input_error(whole.files.optim_files[r],
                              "partition_count differs from " + whole.files.optim_files[0]);
        }
    }
    if (world % views.ep_size != 0) {
        throw_input_error(origin, std::to_string(world) +
                                      " data-parallel ranks cannot be split into expert-parallel "
                                      "groups of " +
                                      std::to_string(views.ep_size));
    }
    const std::uint32_t edp = world / views.ep_size;
    const bool data_first = rank0.model.states.autoep.data_before_expert_parallel;
    std::vector<std::size_t> dense;
    std::vector<std::uint32_t> all;
    for (std::uint32_t r = 0; r < world; ++r)
        all.push_back(r);
    for (std::size_t g = 0; g < shapes.size(); ++g) {
        const std::int64_t count = first.partition_count[g];
        if (classify_group(shapes[g], g, layers, origin) == GroupKind::kDense) {
            if (count != static_cast<std::int64_t>(world)) {
                throw_input_error(whole.files.optim_files[0],
                                  "dense group " + std::to_string(g) + " is partitioned over " +
                                      std::to_string(count) + " ranks, expected all " +
                                      std::to_string(world));
            }
            dense.push_back(g);
            continue;
        }
        check_local_shapes(shapes[g], layers, origin);
        if (count != static_cast<std::int64_t>(edp)) {
            throw_input_error(whole.files.optim_files[0],
                              "expert group " + std::to_string(g) + " is partitioned over " +
                                  std::to_string(count) + " ranks, expected " +
                                  std::to_string(edp) + " (" + std::to_string(world) +
                                  " ranks / ep_size " + std::to_string(views.ep_size) + ")");
        }
        std::vector<std::vector<std::uint32_t>> members(views.ep_size,
                                                        std::vector<std::uint32_t>(edp));
        for (std::uint32_t r = 0; r < world; ++r) {
            const ExpertPlace place = zero12_expert_place(r, world, views.ep_size, data_first);
            members[place.ep_rank][place.edp_rank] = r;
        }
        for (std::uint32_t e = 0; e < views.ep_size; ++e) {
            AutoEpExpertView expert;
            expert.group = g;
            expert.ep_rank = e;
            expert.members = members[e];
            expert.view = sub_view(whole, members[e], {g}, expert_model(whole.model), false);
            views.experts.push_back(std::move(expert));
        }
    }
    views.dense = sub_view(whole, all, dense, dense_model(whole.model, layers), true);

    // The expert files: every expert of every layer, one tensor per fused weight.
    std::unordered_map<std::string, const NamedShape*> fused;
    for (const auto& group : shapes) {
        for (const NamedShape& shape : group) {
            if (autoep_layer_of(layers, shape.name) != nullptr)
                fused.emplace(shape.name, &shape);
        }
    }
    std::map<std::pair<std::int64_t, std::uint64_t>, const ExpertStateDict*> files;
    for (const ExpertStateDict& expert : meta.experts)
        files.emplace(std::make_pair(expert.moe_layer, expert.expert), &expert);
    for (const AutoEpLayer& layer : layers) {
        for (std::uint64_t e = 0; e < layer.num_experts; ++e) {
            auto it = files.find({layer.moe_layer_id, e});
            if (it == files.end()) {
                throw_input_error(meta.grid.folder.tag_dir,
                                  "layer_" + std::to_string(layer.moe_layer_id) + "_expert_" +
                                      std::to_string(e) +
                                      "_mp_rank_00_model_states.pt is missing (AutoEP layer '" +
                                      layer.module_path + "' has " +
                                      std::to_string(layer.num_experts) + " experts)");
            }
            const std::string& path = meta.inputs.at(it->second->input);
            const std::string suffix = "." + std::to_string(e);
            std::size_t weights = 0;
            for (const NamedTensor& entry : it->second->state.tensors) {
                const std::string base =
                    entry.name.ends_with(suffix)
                        ? entry.name.substr(0, entry.name.size() - suffix.size())
                        : std::string();
                auto weight = fused.find(base);
                if (base.empty() || weight == fused.end() ||
                    autoep_layer_of(layers, base) != &layer) {
                    throw_unsupported(
                        path, "entry '" + entry.name + "' is no expert " + std::to_string(e) +
                                  " of a trainable fused weight of '" + layer.expert_key_prefix +
                                  "' (frozen expert weights are not supported)");
                }
                const std::vector<std::uint64_t>& local = weight->second->shape;
                if (!std::equal(entry.tensor.shape.begin(), entry.tensor.shape.end(),
                                local.begin() + 1, local.end())) {
                    throw_input_error(path, "expert weight '" + entry.name +
                                                "' has another shape than one expert of '" + base +
                                                "' in param_shapes");
                }
                ++weights;
            }
            std::size_t expected = 0;
            for (const auto& [name, shape] : fused)
                expected += autoep_layer_of(layers, name) == &layer ? 1u : 0u;
            if (weights != expected) {
                throw_input_error(path, "holds " + std::to_string(weights) +
                                            " expert weights, the layer has " +
                                            std::to_string(expected) + " fused weights");
            }
        }
    }
    std::set<std::pair<std::int64_t, std::uint64_t>> expected_files;
    for (const AutoEpLayer& layer : layers) {
        for (std::uint64_t e = 0; e < layer.num_experts; ++e)
            expected_files.emplace(layer.moe_layer_id, e);
    }
    for (const auto& [key, expert] : files) {
        if (expected_files.count(key) == 0) {
            throw_input_error(meta.inputs.at(expert->input),
                              "is an expert file of no expert of the AutoEP layers the model file "
                              "records (ds_autoep_layers)");
        }
    }
    views.whole = std::move(whole);
    return views;
}

}  // namespace z2f::checkpoint
