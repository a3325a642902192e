#include "plan/autoep_universal_plan.hpp"

#include <unordered_map>

#include "common/errors.hpp"
#include "plan/autoep_plan.hpp"
#include "plan/universal_state_check.hpp"

namespace z2f::plan {
namespace {

// The dict entries of a fused expert weight, after 'param', in DeepSpeed's order.
std::vector<ParamDictEntry> expert_entries(const checkpoint::AutoEpLayer& layer) {
    std::vector<ParamDictEntry> entries = {
        {"cat_dim", 0, false},
        {"is_expert_param", 1, true},
        {"ep_num_experts", static_cast<std::int64_t>(layer.num_experts), false}};
    for (ParamDictEntry& entry : entries)
        entry.after_param = true;
    return entries;
}

}  // namespace

UniversalPlan plan_autoep_universal(const checkpoint::AutoEpViews& views) {
    const checkpoint::CheckpointMeta& whole = views.whole;
    check_universal_optimizer_state(whole);
    check_universal_steps(whole);
    check_universal_param_groups(whole);
    // Every rank's step of every group, experts included, must agree: each rank's loader
    // restores the same step.pt into its own partitions.
    for (std::size_t r = 1; r < whole.optim.size(); ++r) {
        for (std::size_t g = 0; g < whole.optim[r].group_states.size(); ++g) {
            if (g < whole.optim[0].group_states.size() &&
                whole.optim[r].group_states[g].step != whole.optim[0].group_states[g].step) {
                throw_input_error(whole.files.optim_files[r],
                                  "Adam step of flat group " + std::to_string(g) +
                                      " differs from " + whole.files.optim_files[0] + "'s");
            }
        }
    }
    std::array<PiecedPlan, 3> streams;
    for (std::size_t s = 0; s < kUniversalStreams.size(); ++s)
        streams[s] =
            plan_autoep_consolidation(views, universal_stream_options(kUniversalStreams[s]));
    const std::unordered_map<std::string, std::size_t> group_of = param_group_of(whole.model);

    UniversalPlan result;
    result.plan.inputs = streams[0].plan.inputs;
    result.plan.records = whole.records;
    result.warnings = std::move(streams[0].warnings);
    result.notes = std::move(streams[0].notes);
    for (std::size_t i = 0; i < streams[0].plan.tensors.size(); ++i) {
        const PlannedTensor& master = streams[0].plan.tensors[i];
        if (master.role != TensorRole::kTrainable)
            continue;
        check_universal_param_name(master.name, views.origin);
        const checkpoint::AutoEpLayer* layer =
            checkpoint::autoep_layer_of(views.layers, master.name);
        UniversalParam param;
        param.name = master.name;
        param.group = group_of.at(master.name);
        if (layer != nullptr) {
            param.entries = expert_entries(*layer);
        } else if (views.zero3) {
            param.entries.clear();
            param.raw = true;
        }
        if (!views.zero3)
            param.step = whole.optim.front().group_states.at(param.group).step;
        for (std::size_t s = 0; s < kUniversalStreams.size(); ++s) {
            PlannedTensor tensor = streams[s].plan.tensors.at(i);
            if (tensor.name != master.name || tensor.shape != master.shape ||
                !flattenable(tensor.pieces)) {
                throw_internal_error("AutoEP universal plan: streams list different tensors");
            }
            add_stream_tensor(result, param, s, std::move(tensor));
        }
        result.params.push_back(std::move(param));
    }
    if (result.params.empty()) {
        throw_input_error(views.origin,
                          "has no trainable parameters: a universal checkpoint would be empty");
    }
    result.tag = whole.files.tag;
    result.stage3 = views.zero3;
    for (const std::string& path : whole.files.model_files) {
        for (std::uint32_t input = 0; input < whole.inputs.size(); ++input) {
            if (whole.inputs[input] == path)
                result.copies.push_back({path, input, whole.input_sizes.at(input)});
        }
    }
    return result;
}

}  // namespace z2f::plan
