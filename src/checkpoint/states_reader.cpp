#include "checkpoint/states_reader.hpp"

#include "checkpoint/field.hpp"
#include "checkpoint/optimizer_state_reader.hpp"
#include "common/errors.hpp"

namespace z2f::checkpoint {
namespace {

Field root_dict(const container::TorchFile& file, const char* what) {
    Field root(file, file.root(), "");
    if (!root.is_dict()) {
        throw_input_error(file.path(), std::string("top level of the pickle is ") +
                                           pickle::describe_type(file.root()) +
                                           ", expected the dict of a DeepSpeed " + what + " file");
    }
    return root;
}

// One ordered list of (name, shape) per flat group. Accepts the current list of OrderedDicts
// and the single dict of DeepSpeed < 0.5.4.
std::vector<std::vector<NamedShape>> read_param_shapes(const Field& field) {
    std::vector<Field> groups;
    if (field.is_dict()) {
        groups.push_back(field);
    } else if (field.is_list_like()) {
        groups = field.elements();
    } else {
        field.fail("a list of dicts of parameter shapes");
    }
    std::vector<std::vector<NamedShape>> out;
    for (const Field& group : groups) {
        std::vector<NamedShape> shapes;
        for (const auto& [name, shape] : group.entries()) {
            shapes.push_back({name, shape.as_shape()});
        }
        out.push_back(std::move(shapes));
    }
    return out;
}

std::vector<NamedTensor> read_named_tensors(const Field& field, std::uint32_t file_index) {
    std::vector<NamedTensor> out;
    for (const auto& [name, value] : field.entries()) {
        out.push_back({name, value.as_tensor(file_index)});
    }
    return out;
}

std::string read_version(const Field& holder) {
    std::optional<Field> version = holder.find("ds_version");
    if (version && version->value().string()) {
        return version->as_string();
    }
    return {};
}

// ZeroStageEnum names (deepspeed/runtime/zero/config.py).
std::int64_t stage_from_name(const Field& field, std::string_view name) {
    if (name == "disabled")
        return 0;
    if (name == "optimizer_states")
        return 1;
    if (name == "gradients")
        return 2;
    if (name == "weights" || name == "max_stage")
        return 3;
    field.fail("a ZeroStageEnum member (disabled, optimizer_states, gradients, weights)");
}

std::int64_t read_zero_stage(const Field& field) {
    std::int64_t stage = -1;
    if (field.value().is_int()) {
        stage = field.as_int();
    } else if (const auto* instance = field.value().get<pickle::Instance>()) {
        const pickle::Global* callable = instance->global();
        const auto* args = instance->args.get<pickle::Tuple>();
        if (callable != nullptr && args != nullptr) {
            if (callable->name == "ZeroStageEnum" && args->items.size() == 1 &&
                args->items[0].is_int()) {
                stage = args->items[0].as_int();  // ZeroStageEnum(3)
            } else if ((callable->module == "__builtin__" || callable->module == "builtins") &&
                       callable->name == "getattr" && args->items.size() == 2) {
                const auto* owner = args->items[0].get<pickle::Global>();
                auto name = args->items[1].string();
                if (owner != nullptr && owner->name == "ZeroStageEnum" && name) {
                    stage = stage_from_name(field, *name);  // getattr(ZeroStageEnum, 'weights')
                }
            }
        }
        if (stage < 0) {
            field.fail("ZeroStageEnum(<int>) or getattr(ZeroStageEnum, <name>)");
        }
    } else {
        field.fail("a ZeroStageEnum or an int");
    }
    if (stage < 0 || stage > 3) {
        throw_input_error(field.file().path(),
                          field.path() + " is " + std::to_string(stage) + ", expected 0 to 3");
    }
    return stage;
}

}  // namespace

ModelStatesInfo read_model_states(const container::TorchFile& file, std::uint32_t file_index,
                                  ModelFileScope scope) {
    Field root = root_dict(file, "model-states");
    ModelStatesInfo info;
    if (std::optional<Field> fragments = root.find("frozen_param_fragments");
        fragments && !fragments->is_none()) {
        info.frozen_param_fragments = read_named_tensors(*fragments, file_index);
    }
    info.autoep = read_autoep_info(root);
    if (scope == ModelFileScope::kFrozenFragmentsOnly) {
        return info;
    }

    info.ds_version = read_version(root);
    if (std::optional<Field> names = root.find("buffer_names"); names && !names->is_none()) {
        info.has_buffer_names = true;
        for (const Field& name : names->elements()) {
            info.buffer_names.push_back(name.as_string());
        }
    }
    std::optional<Field> module = root.find("module");
    if (!module || module->is_none()) {
        info.module_is_none = true;
    } else {
        for (const auto& [name, value] : module->entries()) {
            if (value.value().get<pickle::Tensor>() != nullptr) {
                info.module_tensors.push_back({name, value.as_tensor(file_index)});
            }
        }
    }
    if (std::optional<Field> shapes = root.find("param_shapes"); shapes && !shapes->is_none()) {
        info.param_shapes = read_param_shapes(*shapes);
    }
    if (std::optional<Field> frozen = root.find("frozen_param_shapes");
        frozen && !frozen->is_none()) {
        std::vector<NamedShape> shapes;
        for (const auto& [name, shape] : frozen->entries()) {
            shapes.push_back({name, shape.as_shape()});
        }
        info.frozen_param_shapes = std::move(shapes);
    }
    if (std::optional<Field> shared = root.find("shared_params"); shared && !shared->is_none()) {
        std::vector<std::pair<std::string, std::string>> pairs;
        for (const auto& [alias, owner] : shared->entries()) {
            pairs.emplace_back(alias, owner.as_string());
        }
        info.shared_params = std::move(pairs);
    }
    if (std::optional<Field> dp = root.find("dp_world_size"); dp && dp->value().is_int()) {
        info.dp_world_size = dp->as_int();
    }
    if (std::optional<Field> mp = root.find("mp_world_size"); mp && mp->value().is_int()) {
        info.mp_world_size = mp->as_int();
    }
    if (std::optional<Field> dims = root.find("checkpoint_parallel_dimensions");
        dims && dims->is_dict()) {
        if (std::optional<Field> tp = dims->find("tp_degree"); tp && tp->value().is_int()) {
            info.tp_degree = tp->as_int();
        }
        if (std::optional<Field> pp = dims->find("pp_degree"); pp && pp->value().is_int()) {
            info.pp_degree = pp->as_int();
        }
    }
    return info;
}

OptimStatesInfo read_optim_states(const container::TorchFile& file, std::uint32_t file_index) {
    Field root = root_dict(file, "optimizer-states");
    std::optional<Field> osd = root.find("optimizer_state_dict");
    if (!osd) {
        throw_input_error(file.path(),
                          "has no 'optimizer_state_dict': not a DeepSpeed "
                          "optimizer-states file");
    }
    if (!osd->is_dict()) {
        osd->fail("a dict");
    }
    OptimStatesInfo info;
    info.ds_version = read_version(*osd);
    if (info.ds_version.empty()) {
        info.ds_version = read_version(root);
    }
    if (std::optional<Field> stage = osd->find("zero_stage")) {
        info.zero_stage = read_zero_stage(*stage);
    }

    std::optional<Field> flat = osd->find("fp32_flat_groups");
    std::optional<Field> partitions = osd->find("single_partition_of_fp32_groups");
    if (flat && partitions) {
        throw_input_error(file.path(),
                          "holds both fp32_flat_groups (ZeRO-3) and "
                          "single_partition_of_fp32_groups (ZeRO-1/2)");
    }
    const char* key = nullptr;
    if (flat) {
        if (info.zero_stage >= 0 && info.zero_stage != 3) {
            throw_input_error(file.path(), "zero_stage is " + std::to_string(info.zero_stage) +
                                               " but the file holds ZeRO-3 fp32_flat_groups");
        }
        info.layout = MasterLayout::kPerParam;
        if (info.zero_stage < 0) {
            info.zero_stage = 3;
        }
        key = "fp32_flat_groups";
    } else if (partitions) {
        if (info.zero_stage == 3 || info.zero_stage == 0) {
            throw_input_error(file.path(), "zero_stage is " + std::to_string(info.zero_stage) +
                                               " but the file holds ZeRO-1/2 "
                                               "single_partition_of_fp32_groups");
        }
        // No zero_stage: DeepSpeed's BF16_Optimizer, whose partitions keep their padding.
        info.layout = info.zero_stage < 0 ? MasterLayout::kPaddedGroups : MasterLayout::kFlatGroups;
        key = "single_partition_of_fp32_groups";
    } else {
        throw_input_error(file.path(),
                          "optimizer_state_dict holds no fp32 master partitions "
                          "(single_partition_of_fp32_groups or fp32_flat_groups): not a ZeRO "
                          "checkpoint");
    }
    for (const Field& group : osd->at(key).elements()) {
        TensorRef ref = group.as_tensor(file_index);
        if (!is_floating(ref.dtype)) {
            group.fail("a floating-point master partition");
        }
        if (ref.shape.size() > 1) {
            group.fail("a 1-D master partition");
        }
        info.master.push_back(std::move(ref));
    }

    Field count = osd->at("partition_count");
    if (count.value().is_int()) {
        info.partition_count.push_back(count.as_int());
    } else if (count.is_list_like()) {
        for (const Field& entry : count.elements()) {
            info.partition_count.push_back(entry.as_int());
        }
    } else {
        count.fail("an int or a list of ints");
    }
    if (info.partition_count.empty()) {
        count.fail("a non-empty list");
    }
    for (std::int64_t value : info.partition_count) {
        if (value < 1) {
            count.fail("positive partition counts");
        }
    }

    info.partition_groups = read_zero_partition_groups(*osd);
    if (std::optional<Field> shapes = root.find("param_shapes"); shapes && !shapes->is_none()) {
        info.param_shapes = read_param_shapes(*shapes);
    }
    read_optimizer_state(*osd, file_index, info);
    return info;
}

}  // namespace z2f::checkpoint
