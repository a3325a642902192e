#include "checkpoint/optimizer_state_reader.hpp"

#include <array>
#include <cstring>
#include <string_view>
#include <unordered_map>

#include "zero2fp32/error.hpp"

namespace z2f::checkpoint {
namespace {

// The optimizer_state_dict entries the universal optimizer_state.pt carries over.
constexpr std::array<std::string_view, 8> kGlobalKeys = {
    "loss_scaler", "dynamic_loss_scale", "overflow",        "clip_grad",
    "zero_stage",  "group_paddings",     "partition_count", "ds_version",
};

bool is_global_key(std::string_view key) {
    for (std::string_view known : kGlobalKeys) {
        if (key == known) {
            return true;
        }
    }
    return false;
}

// The int-keyed entries of torch's optimizer `state` dict; a repeated key keeps the last value,
// as Python does. Built once: groups can number in the thousands.
std::unordered_map<std::int64_t, const pickle::Value*> int_keyed_entries(
    const pickle::Value& dict_value) {
    std::unordered_map<std::int64_t, const pickle::Value*> entries;
    if (const auto* dict = dict_value.get<pickle::Dict>()) {
        for (const auto& [key, value] : dict->items) {
            if (key.is_int()) {
                entries[key.as_int()] = &value;
            }
        }
    }
    return entries;
}

std::optional<TensorRef> read_moment(const Field& entry, std::string_view key,
                                     std::uint32_t file_index) {
    std::optional<Field> field = entry.find(key);
    if (!field || field->is_none()) {
        return std::nullopt;
    }
    TensorRef ref = field->as_tensor(file_index);
    if (!is_floating(ref.dtype)) {
        field->fail("a floating-point optimizer state tensor");
    }
    if (ref.shape.size() > 1) {
        field->fail("a 1-D optimizer state tensor");
    }
    return ref;
}

std::optional<OptimizerStep> read_step(const Field& field, std::uint32_t file_index) {
    OptimizerStep step;
    const pickle::Value& value = field.value();
    if (value.is_none()) {
        return std::nullopt;
    }
    if (value.is_int()) {
        step.form = OptimizerStep::Form::kInt;
        step.bits = static_cast<std::uint64_t>(value.as_int());
        return step;
    }
    if (value.is_float()) {
        step.form = OptimizerStep::Form::kFloat;
        double real = value.as_float();
        std::memcpy(&step.bits, &real, sizeof real);
        return step;
    }
    TensorRef ref = field.as_tensor(file_index);
    if (ref.numel != 1 || ref.length > sizeof step.bits) {
        field.fail("a one-element step tensor of at most 8 bytes");
    }
    step.form = OptimizerStep::Form::kTensor;
    step.dtype = ref.dtype;
    step.shape = ref.shape;
    // The one tensor value read in the metadata phase: a handful of bytes per group, so that the
    // universal step.pt and optimizer_state.pt are complete without another pass over the inputs.
    std::array<std::byte, sizeof step.bits> bytes{};
    field.file().file().read_exact(ref.offset, std::span(bytes).first(ref.length));
    for (std::size_t i = ref.length; i-- > 0;) {
        step.bits = (step.bits << 8) | static_cast<std::uint64_t>(bytes[i]);
    }
    return step;
}

OptimizerGroupState read_group_state(const Field& entry, std::uint32_t file_index) {
    OptimizerGroupState state;
    if (!entry.is_dict()) {
        return state;
    }
    // Read off the dict itself: an odd key must not stop a conversion that needs none of this.
    for (const auto& [key, value] : entry.value().get<pickle::Dict>()->items) {
        if (key.string() && value.get<pickle::Tensor>() != nullptr)
            state.tensor_keys.emplace_back(*key.string());
    }
    state.exp_avg = read_moment(entry, "exp_avg", file_index);
    state.exp_avg_sq = read_moment(entry, "exp_avg_sq", file_index);
    if (std::optional<Field> step = entry.find("step")) {
        state.step = read_step(*step, file_index);
    }
    return state;
}

// torch's optimizer.state_dict(): group g's state is keyed by its first parameter's index.
void read_torch_state(const Field& holder, std::size_t groups, std::uint32_t file_index,
                      bool key_by_param_groups, OptimStatesInfo& info) {
    std::optional<Field> state = holder.find("state");
    if (!state || !state->is_dict()) {
        return;
    }
    std::optional<Field> param_groups = holder.find("param_groups");
    std::vector<Field> group_fields;
    if (key_by_param_groups && param_groups && param_groups->is_list_like()) {
        group_fields = param_groups->elements();
    }
    const auto entries = int_keyed_entries(state->value());
    info.group_states.resize(groups);
    for (std::size_t g = 0; g < groups; ++g) {
        auto key = static_cast<std::int64_t>(g);
        if (g < group_fields.size() && group_fields[g].is_dict()) {
            if (std::optional<Field> params = group_fields[g].find("params");
                params && params->is_list_like()) {
                std::vector<Field> ids = params->elements();
                if (!ids.empty() && ids.front().value().is_int()) {
                    key = ids.front().as_int();
                }
            }
        }
        if (auto it = entries.find(key); it != entries.end()) {
            Field field(holder.file(), *it->second,
                        state->path() + "[" + std::to_string(key) + "]");
            info.group_states[g] = read_group_state(field, file_index);
        }
    }
}

}  // namespace

void read_optimizer_state(const Field& osd, std::uint32_t file_index, OptimStatesInfo& info) {
    const std::size_t groups = info.master.size();
    std::optional<Field> param_groups;
    if (info.layout == MasterLayout::kPerParam) {
        if (std::optional<Field> inner = osd.find("optimizer_state_dict");
            inner && inner->is_dict()) {
            // Sub-group j is the optimizer's parameter j (one flat tensor per sub-group).
            read_torch_state(*inner, groups, file_index, false, info);
            param_groups = inner->find("param_groups");
        }
    } else if (std::optional<Field> base = osd.find("base_optimizer_state")) {
        if (base->is_dict()) {
            read_torch_state(*base, groups, file_index, true, info);
            param_groups = base->find("param_groups");
        } else if (base->is_list_like()) {
            std::vector<Field> entries = base->elements();
            info.group_states.resize(groups);
            std::optional<Field> shared_step = osd.find("base_optimizer_state_step");
            for (std::size_t g = 0; g < groups && g < entries.size(); ++g) {
                info.group_states[g] = read_group_state(entries[g], file_index);
                if (!info.group_states[g].step && shared_step) {
                    info.group_states[g].step = read_step(*shared_step, file_index);
                }
            }
        }
    }

    PickledGraphBuilder builder(info.global_state.graph, osd.file().path());
    if (const auto* dict = osd.value().get<pickle::Dict>()) {
        for (const auto& [key, value] : dict->items) {
            std::optional<std::string_view> text = key.string();
            if (!text || !is_global_key(*text)) {
                continue;
            }
            PickledEntry entry;
            entry.key = std::string(*text);
            entry.key_node = builder.capture(key, osd.path());
            entry.value_node = builder.capture(value, "optimizer_state_dict." + entry.key);
            info.global_state.entries.push_back(std::move(entry));
        }
    }
    if (param_groups && param_groups->is_list_like()) {
        info.global_state.param_groups =
            builder.capture(param_groups->value(), param_groups->path());
    }
}

}  // namespace z2f::checkpoint
