#include "synth/states_pickles.hpp"

#include <algorithm>
#include <map>
#include <memory>

#include "pickle/pickle_writer.hpp"
#include "synth/value_function.hpp"

namespace z2f::synth {
namespace {

using pickle::PickleValue;
using pickle::StorageToWrite;
using pickle::TensorToWrite;
using Items = PickleValue::Items;

constexpr const char* kDsVersion = "0.14.5";  // the version the bundled real fixtures carry
constexpr std::int64_t kGlobalSteps = 2;
constexpr double kLearningRate = 0.01;
constexpr double kWeightDecay = 0.01;

// Hands out storage keys in pickling order and remembers what each record holds.
class StorageTable {
  public:
    StorageToWrite add(RecordContent content) {
        StorageToWrite storage;
        storage.dtype = content.dtype();
        storage.key = std::to_string(records_.size());
        storage.numel = content.numel();
        records_.push_back({storage.key, std::move(content)});
        return storage;
    }

    // torch.save writes `for key in sorted(serialized_storages)`: string order, so data/10
    // comes before data/2.
    std::vector<StorageRecord> take_in_torch_order() {
        std::sort(records_.begin(), records_.end(),
                  [](const StorageRecord& a, const StorageRecord& b) { return a.key < b.key; });
        return std::move(records_);
    }

  private:
    std::vector<StorageRecord> records_;
};

// Appends one dict item. Out of line on purpose: GCC 12 inlines vector growth into callers
// and then warns (-Warray-bounds) about the empty vector it started from.
[[gnu::noinline]] void put(Items& items, PickleValue key, PickleValue value) {
    items.emplace_back(std::move(key), std::move(value));
}

PickleValue tensor(const StorageToWrite& storage, std::uint64_t offset,
                   std::vector<std::uint64_t> shape, bool requires_grad = false) {
    TensorToWrite t;
    t.storage = storage;
    t.storage_offset = offset;
    t.shape = std::move(shape);
    t.requires_grad = requires_grad;
    return PickleValue::tensor(std::move(t));
}

// torch >= 2.0 pickles a plain tensor that carries Python attributes (ZeRO-3 sets ds_id on
// each fp32 flat group) as _rebuild_from_type_v2(_rebuild_tensor_v2, Tensor, args, state).
PickleValue tensor_with_ds_id(const StorageToWrite& storage, std::vector<std::uint64_t> shape,
                              const std::string& ds_id) {
    auto dims = std::span<const std::uint64_t>(shape);
    PickleValue args =
        PickleValue::tuple({PickleValue::storage(storage), 0, PickleValue::int_tuple(dims),
                            PickleValue::int_tuple(pickle::contiguous_strides(dims)), true,
                            PickleValue::ordered_dict({})});
    return PickleValue::reduce(
        PickleValue::global("torch._tensor", "_rebuild_from_type_v2"),
        PickleValue::tuple({PickleValue::global("torch._utils", "_rebuild_tensor_v2"),
                            PickleValue::global("torch", "Tensor"), std::move(args),
                            PickleValue::dict({{"ds_id", ds_id}})}));
}

PickleValue torch_size(const std::vector<std::uint64_t>& shape) {
    return PickleValue::torch_size(shape);
}

PickleValue ds_config(const SynthContext& context) {
    Items zero{{"stage", context.options.stage}};
    if (context.options.stage == 3) {
        put(zero, "sub_group_size", context.options.sub_group_size);
    }
    Items items{
        {"train_micro_batch_size_per_gpu", 1},
        {"gradient_accumulation_steps", 1},
        {"steps_per_print", 1000},
        {"optimizer",
         PickleValue::dict({{"type", "AdamW"},
                            {"params", PickleValue::dict({{"lr", kLearningRate},
                                                          {"weight_decay", kWeightDecay}})}})},
        {"zero_optimization", PickleValue::dict(std::move(zero))},
        {"wall_clock_breakdown", false},
    };
    if (context.model_dtype() == DType::kBF16) {
        put(items, "bf16", PickleValue::dict({{"enabled", true}}));
    } else if (context.model_dtype() == DType::kF16) {
        put(items, "fp16", PickleValue::dict({{"enabled", true}}));
    }
    return PickleValue::dict(std::move(items));
}

PickleValue zero_stage(const SynthContext& context) {
    PickleValue enum_class = PickleValue::global("deepspeed.runtime.zero.config", "ZeroStageEnum");
    int stage = context.options.stage;
    if (context.options.zero_stage_encoding == ZeroStageEncoding::kByValue) {
        return PickleValue::reduce(std::move(enum_class), PickleValue::tuple({stage}));
    }
    return PickleValue::reduce(
        PickleValue::global("__builtin__", "getattr"),
        PickleValue::tuple({std::move(enum_class), stage == 3 ? "weights" : "gradients"}));
}

// bf16 and fp32 runs use a static LossScaler(1.0); fp16 runs DeepSpeed's DynamicLossScaler
// (attributes in the order its __init__ sets them).
PickleValue loss_scaler(const SynthContext& context) {
    const char* module = "deepspeed.runtime.fp16.loss_scaler";
    if (context.model_dtype() != DType::kF16) {
        return PickleValue::object(PickleValue::global(module, "LossScaler"),
                                   PickleValue::dict({{"cur_scale", 1.0}, {"dynamic", false}}));
    }
    return PickleValue::object(
        PickleValue::global(module, "DynamicLossScaler"),
        PickleValue::dict({{"cur_scale", 65536.0},
                           {"dynamic", true},
                           {"cur_iter", kGlobalSteps},
                           {"last_overflow_iter", -1},
                           {"scale_factor", 2.0},
                           {"scale_window", 1000},
                           {"min_scale", 1},
                           {"delayed_shift", 2},
                           {"cur_hysteresis", 2},
                           {"consecutive_hysteresis", false},
                           {"raise_error_at_min_scale", true},
                           {"dtype", PickleValue::global("torch", "float16")}}));
}

// torch.optim.AdamW's param_groups entry. Hugging Face's Trainer passes {params,
// weight_decay} per group, so weight_decay comes first there; a single group built from the
// optimizer's defaults lists lr first.
PickleValue param_group(const SynthContext& context, int group, std::vector<PickleValue> params) {
    bool decay = context.model.group_is_decay[static_cast<std::size_t>(group)];
    PickleValue betas = PickleValue::tuple({0.9, 0.999});
    Items items;
    if (context.model.hf_groups) {
        put(items, "weight_decay", decay ? kWeightDecay : 0.0);
        put(items, "lr", kLearningRate);
        put(items, "betas", std::move(betas));
        put(items, "eps", 1e-08);
    } else {
        put(items, "lr", kLearningRate);
        put(items, "betas", std::move(betas));
        put(items, "eps", 1e-08);
        put(items, "weight_decay", kWeightDecay);
    }
    put(items, "amsgrad", false);
    put(items, "foreach", PickleValue::none());
    put(items, "maximize", false);
    put(items, "capturable", false);
    put(items, "params", PickleValue::list(std::move(params)));
    return PickleValue::dict(std::move(items));
}

// Adam moments of one flat tensor of `numel` elements: real values, holes, or nothing.
PickleValue adam_state(const SynthContext& context, StorageTable& storages, std::uint64_t numel,
                       const std::string& where) {
    RecordContent step(DType::kF32);
    step.add_constant_f32(static_cast<float>(kGlobalSteps), 1);
    Items items;
    put(items, "step", tensor(storages.add(std::move(step)), 0, {}));
    for (const char* moment : {"exp_avg", "exp_avg_sq"}) {
        RecordContent content(DType::kF32);
        content.add_values(context.key(std::string(moment) + "/" + where), 0, numel);
        content.set_hole(context.options.sparse_moments || context.options.sparse_masters);
        put(items, moment, tensor(storages.add(std::move(content)), 0, {numel}));
    }
    return PickleValue::dict(std::move(items));
}

// The module state dict's _metadata: {prefix: {'version': 1}} for every submodule.
PickleValue module_metadata(const SynthContext& context) {
    Items items;
    items.reserve(context.model.submodules.size());
    for (const std::string& prefix : context.model.submodules) {
        put(items, prefix, PickleValue::dict({{"version", 1}}));
    }
    return PickleValue::dict({{"_metadata", PickleValue::ordered_dict(std::move(items))}});
}

// A full model-dtype tensor of `param` (stage-2 frozen parameters).
RecordContent full_param_content(const SynthContext& context, const ModelParam& param) {
    RecordContent content(context.model_dtype());
    content.add_values(context.key(param.name), 0, param.numel());
    content.set_hole(context.options.sparse_masters);
    return content;
}

RecordContent buffer_content(const SynthContext& context, const ModelBuffer& buffer) {
    RecordContent content(buffer.is_int ? DType::kI64 : context.model_dtype());
    if (buffer.is_int) {
        content.add_arange(0, buffer.numel());
    } else {
        content.add_values(context.key(buffer.name), 0, buffer.numel());
    }
    return content;
}

// Model-state keys shared by both stages, after the stage-specific first seven.
void add_model_state_tail(const SynthContext& context, Items& items) {
    const std::uint32_t world = context.world();
    put(items, "lr_scheduler", PickleValue::none());
    put(items, "data_sampler", PickleValue::none());
    put(items, "random_ltd", PickleValue::none());
    put(items, "sparse_tensor_module_names",
        PickleValue::reduce(PickleValue::global("__builtin__", "set"),
                            PickleValue::tuple({PickleValue::list({})})));
    put(items, "skipped_steps", 0);
    put(items, "global_steps", kGlobalSteps);
    put(items, "global_samples", kGlobalSteps * world);
    put(items, "dp_world_size", world);
    put(items, "mp_world_size", 1);
    put(items, "ds_config", ds_config(context));
    put(items, "ds_version", kDsVersion);
}

PickleValue buffer_names(const SynthContext& context) {
    std::vector<PickleValue> names;
    for (const ModelBuffer& buffer : context.model.buffers) {
        names.emplace_back(buffer.name);
    }
    return PickleValue::list(std::move(names));
}

PickleValue shared_params(const SynthContext& context) {
    Items items;
    if (context.model.tied_alias) {
        put(items, *context.model.tied_alias, context.model.params[context.model.tied_owner].name);
    }
    return PickleValue::dict(std::move(items));
}

PickleValue frozen_param_shapes(const SynthContext& context) {
    Items items;
    for (const ModelParam& param : context.model.params) {
        if (!param.trainable) {
            put(items, param.name, torch_size(param.shape));
        }
    }
    return PickleValue::ordered_dict(std::move(items));
}

PickledFile finish(PickleValue root, StorageTable& storages) {
    PickledFile file;
    file.pickle = pickle::dump(root);
    file.records = storages.take_in_torch_order();
    return file;
}

// ---------------------------------------------------------------------------------------------
// Stage 2

PickledFile stage2_model_states(const SynthContext& context) {
    const ModelSpec& model = context.model;
    const Stage2Layout& layout = context.stage2;
    StorageTable storages;

    // Where each trainable param sits: its group and flat offset.
    std::vector<std::pair<std::size_t, std::uint64_t>> flat_place(model.params.size());
    for (std::size_t g = 0; g < layout.groups.size(); ++g) {
        std::uint64_t offset = 0;
        for (std::size_t index : layout.groups[g].params) {
            flat_place[index] = {g, offset};
            offset += model.params[index].numel();
        }
    }
    // Storages are created when the module state dict first references them.
    std::vector<std::unique_ptr<StorageToWrite>> group_storage(layout.groups.size());
    std::vector<std::unique_ptr<StorageToWrite>> frozen_storage(model.params.size());
    auto param_tensor = [&](std::size_t index) {
        const ModelParam& param = model.params[index];
        if (!param.trainable) {
            if (!frozen_storage[index]) {
                frozen_storage[index] = std::make_unique<StorageToWrite>(
                    storages.add(full_param_content(context, param)));
            }
            return tensor(*frozen_storage[index], 0, param.shape);
        }
        auto [g, offset] = flat_place[index];
        if (!group_storage[g]) {
            // The flat bit16 buffer of the group: params in flat order, then the alignment.
            RecordContent content(context.model_dtype());
            for (std::size_t member : layout.groups[g].params) {
                content.add_values(context.key(model.params[member].name), 0,
                                   model.params[member].numel());
            }
            content.add_zeros(layout.groups[g].aligned - layout.groups[g].numel);
            content.set_hole(context.options.sparse_masters);
            group_storage[g] = std::make_unique<StorageToWrite>(storages.add(std::move(content)));
        }
        return tensor(*group_storage[g], offset, param.shape);
    };

    Items module;
    for (const ModuleEntry& entry : model.module) {
        switch (entry.kind) {
            case ModuleEntry::Kind::kBuffer: {
                const ModelBuffer& buffer = model.buffers[entry.index];
                put(module, entry.name,
                    tensor(storages.add(buffer_content(context, buffer)), 0, buffer.shape));
                break;
            }
            case ModuleEntry::Kind::kParam:
            case ModuleEntry::Kind::kAlias:
                put(module, entry.name, param_tensor(entry.index));
                break;
        }
    }

    Items items;
    put(items, "module",
        PickleValue::build(PickleValue::ordered_dict(std::move(module)), module_metadata(context)));
    put(items, "buffer_names", buffer_names(context));
    put(items, "optimizer", PickleValue::none());
    std::vector<PickleValue> shapes;
    for (const FlatGroup& group : layout.groups) {
        Items group_shapes;
        for (std::size_t index : group.params) {
            put(group_shapes, model.params[index].name, torch_size(model.params[index].shape));
        }
        shapes.push_back(PickleValue::ordered_dict(std::move(group_shapes)));
    }
    put(items, "param_shapes", PickleValue::list(std::move(shapes)));
    put(items, "frozen_param_shapes", frozen_param_shapes(context));
    put(items, "shared_params", shared_params(context));
    // On the CPU, param.detach().cpu() is the parameter's own storage: the fragment is
    // pickled as a second view of the module entry's record.
    Items fragments;
    for (std::size_t i = 0; i < model.params.size(); ++i) {
        if (!model.params[i].trainable) {
            put(fragments, model.params[i].name, param_tensor(i));
        }
    }
    put(items, "frozen_param_fragments", PickleValue::ordered_dict(std::move(fragments)));
    add_model_state_tail(context, items);
    return finish(PickleValue::dict(std::move(items)), storages);
}

PickledFile stage2_optim_states(const SynthContext& context, std::uint32_t rank) {
    const ModelSpec& model = context.model;
    const Stage2Layout& layout = context.stage2;
    const std::string rank_text = std::to_string(rank);
    StorageTable storages;

    Items base_state;
    if (context.options.moments) {
        for (std::size_t g = 0; g < layout.groups.size(); ++g) {
            put(base_state, g,
                adam_state(context, storages, layout.groups[g].partition,
                           rank_text + "/" + std::to_string(g)));
        }
    }
    std::vector<PickleValue> groups;
    for (std::size_t g = 0; g < layout.groups.size(); ++g) {
        groups.push_back(param_group(context, static_cast<int>(g), {PickleValue(g)}));
    }

    std::vector<PickleValue> partitions;
    std::vector<PickleValue> paddings;
    std::vector<PickleValue> counts;
    std::vector<PickleValue> mappings;
    for (const FlatGroup& group : layout.groups) {
        std::vector<Fragment> fragments = stage2_fragments(model, group, rank);
        // The rank's whole partition (P elements, padding zeroed), saved as a [:P-pad] view.
        RecordContent content(DType::kF32);
        Items mapping;
        for (const Fragment& fragment : fragments) {
            const ModelParam& param = model.params[fragment.param];
            content.add_values(context.key(param.name), fragment.first, fragment.count);
            put(mapping, param.name,
                PickleValue::object(
                    PickleValue::global("deepspeed.utils.tensor_fragment", "fragment_address"),
                    PickleValue::dict({{"numel", fragment.count}, {"start", fragment.offset}})));
        }
        content.add_zeros(group.partition - content.numel());
        content.set_hole(context.options.sparse_masters);
        partitions.push_back(
            tensor(storages.add(std::move(content)), 0, {group.saved_length(rank)}, true));
        paddings.emplace_back(group.padding(rank));
        counts.emplace_back(context.world());
        mappings.push_back(PickleValue::ordered_dict(std::move(mapping)));
    }

    Items osd;
    put(osd, "loss_scaler", loss_scaler(context));
    put(osd, "dynamic_loss_scale", context.model_dtype() == DType::kF16);
    put(osd, "overflow", false);
    put(osd, "clip_grad", 1.0);
    put(osd, "base_optimizer_state",
        PickleValue::dict({{"state", PickleValue::dict(std::move(base_state))},
                           {"param_groups", PickleValue::list(std::move(groups))}}));
    put(osd, "single_partition_of_fp32_groups", PickleValue::list(std::move(partitions)));
    put(osd, "zero_stage", zero_stage(context));
    put(osd, "group_paddings", PickleValue::list(std::move(paddings)));
    put(osd, "partition_count", PickleValue::list(std::move(counts)));
    put(osd, "ds_version", kDsVersion);
    put(osd, "param_slice_mappings", PickleValue::list(std::move(mappings)));
    return finish(PickleValue::dict({{"optimizer_state_dict", PickleValue::dict(std::move(osd))},
                                     {"ds_config", ds_config(context)},
                                     {"ds_version", kDsVersion}}),
                  storages);
}

// ---------------------------------------------------------------------------------------------
// Stage 3

PickledFile stage3_model_states(const SynthContext& context, std::uint32_t rank) {
    const ModelSpec& model = context.model;
    const std::uint32_t world = context.world();
    StorageTable storages;

    // Placeholders: torch.empty(0) per partitioned parameter, in the model dtype.
    std::vector<std::unique_ptr<StorageToWrite>> placeholder(model.params.size());
    auto placeholder_tensor = [&](std::size_t index) {
        if (!placeholder[index]) {
            placeholder[index] = std::make_unique<StorageToWrite>(
                storages.add(RecordContent(context.model_dtype())));
        }
        return tensor(*placeholder[index], 0, {0});
    };
    Items module;
    for (const ModuleEntry& entry : model.module) {
        if (entry.kind == ModuleEntry::Kind::kBuffer) {
            const ModelBuffer& buffer = model.buffers[entry.index];
            put(module, entry.name,
                tensor(storages.add(buffer_content(context, buffer)), 0, buffer.shape));
        } else {
            put(module, entry.name, placeholder_tensor(entry.index));
        }
    }

    Items items;
    put(items, "module",
        PickleValue::build(PickleValue::ordered_dict(std::move(module)), module_metadata(context)));
    put(items, "buffer_names", buffer_names(context));
    put(items, "optimizer", PickleValue::none());
    std::vector<PickleValue> shapes;
    for (const SubGroup& subgroup : context.stage3.subgroups) {
        Items group_shapes;
        for (std::size_t index : subgroup.params) {
            put(group_shapes, model.params[index].name, torch_size(model.params[index].shape));
        }
        shapes.push_back(PickleValue::ordered_dict(std::move(group_shapes)));
    }
    put(items, "param_shapes", PickleValue::list(std::move(shapes)));
    put(items, "frozen_param_shapes", frozen_param_shapes(context));
    put(items, "shared_params", shared_params(context));
    Items fragments;
    for (const ModelParam& param : model.params) {
        if (param.trainable) {
            continue;
        }
        // ds_tensor: this rank's slot of ceil(n/W) elements, zero padded.
        std::uint64_t slot = stage3_slot(param.numel(), world);
        Fragment fragment = stage3_fragment(param.numel(), world, rank);
        RecordContent content(context.model_dtype());
        content.add_values(context.key(param.name), fragment.first, fragment.count);
        content.add_zeros(slot - fragment.count);
        content.set_hole(context.options.sparse_masters);
        put(fragments, param.name, tensor(storages.add(std::move(content)), 0, {slot}));
    }
    put(items, "frozen_param_fragments", PickleValue::ordered_dict(std::move(fragments)));
    add_model_state_tail(context, items);
    return finish(PickleValue::dict(std::move(items)), storages);
}

PickledFile stage3_optim_states(const SynthContext& context, std::uint32_t rank) {
    const ModelSpec& model = context.model;
    const Stage3Layout& layout = context.stage3;
    const std::uint32_t world = context.world();
    const std::string rank_text = std::to_string(rank);
    StorageTable storages;

    Items osd;
    put(osd, "zero_stage", zero_stage(context));
    put(osd, "loss_scaler", loss_scaler(context));
    put(osd, "dynamic_loss_scale", context.model_dtype() == DType::kF16);
    put(osd, "overflow", false);
    put(osd, "partition_count", world);

    Items state;
    if (context.options.moments) {
        for (std::size_t j = 0; j < layout.subgroups.size(); ++j) {
            put(state, j,
                adam_state(context, storages, layout.subgroups[j].total,
                           rank_text + "/" + std::to_string(j)));
        }
    }
    // Each optimizer param group holds its sub-groups' fp32 flats, numbered in order.
    std::vector<PickleValue> groups;
    for (int g = 0; g < model.group_count; ++g) {
        std::vector<PickleValue> members;
        for (std::size_t j = 0; j < layout.subgroups.size(); ++j) {
            if (layout.subgroups[j].param_group == g) {
                members.emplace_back(j);
            }
        }
        groups.push_back(param_group(context, g, std::move(members)));
    }
    put(osd, "optimizer_state_dict",
        PickleValue::dict({{"state", PickleValue::dict(std::move(state))},
                           {"param_groups", PickleValue::list(std::move(groups))}}));

    // ds_id of a parameter: its position in module order, as zero.Init numbers them.
    std::vector<PickleValue> flats;
    for (const SubGroup& subgroup : layout.subgroups) {
        RecordContent content(DType::kF32);
        for (std::size_t k = 0; k < subgroup.params.size(); ++k) {
            const ModelParam& param = model.params[subgroup.params[k]];
            Fragment fragment = stage3_fragment(param.numel(), world, rank);
            content.add_values(context.key(param.name), fragment.first, fragment.count);
            content.add_zeros(subgroup.slots[k] - fragment.count);
        }
        content.set_hole(context.options.sparse_masters);
        StorageToWrite storage = storages.add(std::move(content));
        if (context.options.torch2) {
            std::string ds_id = std::to_string(subgroup.params.front()) + "_" +
                                std::to_string(subgroup.params.back());
            flats.push_back(tensor_with_ds_id(storage, {subgroup.total}, ds_id));
        } else {
            flats.push_back(tensor(storage, 0, {subgroup.total}, true));
        }
    }
    put(osd, "fp32_flat_groups", PickleValue::list(std::move(flats)));
    return finish(PickleValue::dict({{"optimizer_state_dict", PickleValue::dict(std::move(osd))},
                                     {"ds_config", ds_config(context)},
                                     {"ds_version", kDsVersion}}),
                  storages);
}

}  // namespace

PickledFile model_states_pickle(const SynthContext& context, std::uint32_t rank) {
    return context.options.stage == 2 ? stage2_model_states(context)
                                      : stage3_model_states(context, rank);
}

PickledFile optim_states_pickle(const SynthContext& context, std::uint32_t rank) {
    return context.options.stage == 2 ? stage2_optim_states(context, rank)
                                      : stage3_optim_states(context, rank);
}

}  // namespace z2f::synth
