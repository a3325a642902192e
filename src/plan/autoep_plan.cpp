#include "plan/autoep_plan.hpp"

#include <map>
#include <optional>
#include <unordered_map>

#include "common/errors.hpp"
#include "plan/tp_merge.hpp"

namespace z2f::plan {
namespace {

struct Entry {
    PlannedTensor tensor;  // an alias keeps its owner's name in `owner`
    std::vector<TensorPiece> pieces;
    std::string owner;
};

// Every fused expert weight, whole, in the order the views list them.
std::vector<Entry> merged_experts(const checkpoint::AutoEpViews& views, const PlanOptions& options,
                                  PiecedPlan& result) {
    std::vector<std::string> order;
    std::unordered_map<std::string, PlannedTensor> heads;
    std::unordered_map<std::string, std::vector<std::optional<TpSlice>>> slices;
    for (const checkpoint::AutoEpExpertView& expert : views.experts) {
        ConsolidationPlan local = plan_consolidation(expert.view, options);
        if (&expert == &views.experts.front()) {
            result.warnings.insert(result.warnings.end(), local.warnings.begin(),
                                   local.warnings.end());
        }
        for (const PlannedTensor& tensor : local.plan.tensors) {
            if (tensor.role != TensorRole::kTrainable) {
                throw_internal_error(
                    "AutoEP expert view planned a tensor other than a fused "
                    "weight: " +
                    tensor.name);
            }
            auto [slot, fresh] = slices.try_emplace(tensor.name);
            if (fresh) {
                slot->second.resize(views.ep_size);
                order.push_back(tensor.name);
                heads.emplace(tensor.name, tensor);
            } else if (heads.at(tensor.name).source_dtype != tensor.source_dtype) {
                throw_input_error(expert.view.files.optim_files.front(),
                                  "the partitions of fused expert weight '" + tensor.name +
                                      "' have another dtype than expert-parallel rank 0's");
            }
            if (slot->second.at(expert.ep_rank)) {
                throw_internal_error("AutoEP: two views of expert-parallel rank " +
                                     std::to_string(expert.ep_rank) + " hold '" + tensor.name +
                                     "'");
            }
            slot->second[expert.ep_rank] = TpSlice{tensor.shape, tensor.extents};
        }
    }
    std::vector<Entry> out;
    for (const std::string& name : order) {
        const checkpoint::AutoEpLayer* layer = checkpoint::autoep_layer_of(views.layers, name);
        std::vector<TpSlice> ranks;
        for (std::size_t e = 0; e < views.ep_size; ++e) {
            const std::optional<TpSlice>& slice = slices.at(name)[e];
            if (!slice) {
                throw_input_error(views.origin, "fused expert weight '" + name +
                                                    "' has no partitions of expert-parallel rank " +
                                                    std::to_string(e));
            }
            ranks.push_back(*slice);
        }
        Entry entry;
        entry.tensor = heads.at(name);
        entry.tensor.extents.clear();
        MergedTensor merged =
            merge_cat(ranks, 0, dtype_size(entry.tensor.source_dtype), name, views.origin);
        if (merged.shape.empty() || merged.shape.front() != layer->num_experts) {
            throw_input_error(views.origin,
                              "fused expert weight '" + name + "' holds " +
                                  std::to_string(merged.shape.empty() ? 0 : merged.shape.front()) +
                                  " experts, its layer records " +
                                  std::to_string(layer->num_experts));
        }
        entry.tensor.shape = merged.shape;
        entry.pieces = std::move(merged.pieces);
        entry.tensor.merge = std::to_string(layer->num_experts) + " experts of AutoEP layer " +
                             std::to_string(layer->moe_layer_id) + ", " +
                             std::to_string(layer->num_local_experts) + " per EP rank over " +
                             std::to_string(views.ep_size) + " EP ranks";
        out.push_back(std::move(entry));
    }
    return out;
}

}  // namespace

PiecedPlan plan_autoep_consolidation(const checkpoint::AutoEpViews& views,
                                     const PlanOptions& options) {
    PiecedPlan result;
    ConsolidationPlan dense = plan_consolidation(views.dense, options);
    result.warnings = std::move(dense.warnings);
    result.notes = std::move(dense.notes);
    std::vector<Entry> experts = merged_experts(views, options, result);

    std::vector<Entry> owners;
    std::vector<Entry> aliases;
    std::vector<std::string> names;
    for (const PlannedTensor& tensor : dense.plan.tensors)
        names.push_back(tensor.name);
    for (PlannedTensor& tensor : dense.plan.tensors) {
        Entry entry;
        if (tensor.is_alias()) {
            entry.owner = names.at(static_cast<std::size_t>(tensor.alias_of));
            entry.tensor = std::move(tensor);
            entry.tensor.alias_of = -1;
            aliases.push_back(std::move(entry));
        } else {
            entry.tensor = std::move(tensor);
            owners.push_back(std::move(entry));
        }
    }
    // Each layer's fused weights after the last dense tensor of its module.
    std::map<std::size_t, std::vector<Entry>> after;  // position in `owners` -> experts
    for (Entry& expert : experts) {
        const checkpoint::AutoEpLayer* layer =
            checkpoint::autoep_layer_of(views.layers, expert.tensor.name);
        const std::string module = layer->module_path + ".";
        std::size_t position = owners.size();
        for (std::size_t i = 0; i < owners.size(); ++i) {
            if (owners[i].tensor.name.starts_with(module))
                position = i + 1;
        }
        after[position].push_back(std::move(expert));
    }
    std::vector<Entry> ordered;
    for (std::size_t i = 0; i <= owners.size(); ++i) {
        if (i > 0)
            ordered.push_back(std::move(owners[i - 1]));
        if (auto it = after.find(i); it != after.end()) {
            for (Entry& expert : it->second)
                ordered.push_back(std::move(expert));
        }
    }
    for (Entry& alias : aliases)
        ordered.push_back(std::move(alias));

    result.plan.inputs = dense.plan.inputs;
    std::unordered_map<std::string, std::size_t> index;
    for (Entry& entry : ordered) {
        PlannedTensor tensor = std::move(entry.tensor);
        if (!index.emplace(tensor.name, result.plan.tensors.size()).second) {
            throw_input_error(views.origin, "tensor name '" + tensor.name + "' appears twice");
        }
        if (tensor.role == TensorRole::kAlias) {
            tensor.alias_of = static_cast<std::int64_t>(index.at(entry.owner));
        } else if (!entry.pieces.empty()) {
            const std::uint64_t bytes = tensor.source_bytes();
            check_pieces(entry.pieces, bytes, tensor.name);
            if (flat_is_compact(entry.pieces))
                tensor.extents = flatten_pieces(entry.pieces, bytes, tensor.name);
            tensor.pieces = std::move(entry.pieces);
        }
        result.plan.tensors.push_back(std::move(tensor));
    }
    std::uint64_t experts_total = 0;
    for (const checkpoint::AutoEpLayer& layer : views.layers)
        experts_total += layer.num_experts;
    result.notes.push_back("AutoEP: " + std::to_string(views.layers.size()) + " expert layer(s), " +
                           std::to_string(experts_total) + " experts over " +
                           std::to_string(views.ep_size) +
                           " expert-parallel ranks, written as fused [num_experts, ...] weights");
    return result;
}

}  // namespace z2f::plan
