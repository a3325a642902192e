#include "checkpoint/parallel_states_reader.hpp"

#include "checkpoint/field.hpp"
#include "common/errors.hpp"

namespace z2f::checkpoint {
namespace {

Field top_dict(const container::TorchFile& file, const char* what) {
    Field root(file, file.root(), "");
    if (!root.is_dict()) {
        throw_input_error(file.path(), std::string("top level of the pickle is ") +
                                           pickle::describe_type(file.root()) + ", expected " +
                                           what);
    }
    return root;
}

std::vector<std::string> read_patterns(const Field& info, std::string_view key) {
    std::vector<std::string> out;
    if (std::optional<Field> list = info.find(key); list && !list->is_none()) {
        for (const Field& pattern : list->elements()) {
            out.push_back(pattern.as_string());
        }
    }
    return out;
}

std::uint64_t non_negative(const Field& field) {
    std::int64_t value = field.as_int();
    if (value < 0) {
        field.fail("a non-negative int");
    }
    return static_cast<std::uint64_t>(value);
}

std::vector<std::uint64_t> read_uints(const Field& field) {
    std::vector<std::uint64_t> out;
    for (const Field& item : field.elements()) {
        out.push_back(non_negative(item));
    }
    return out;
}

std::int64_t optional_int(const Field& holder, std::string_view key) {
    if (std::optional<Field> value = holder.find(key); value && value->value().is_int()) {
        return value->as_int();
    }
    return -1;
}

UniversalCheckpointInfo read_universal_info(const Field& info) {
    UniversalCheckpointInfo out;
    if (std::optional<Field> version = info.find("universal_checkpoint_version")) {
        if (version->value().is_float()) {
            out.version = version->value().as_float();
        } else if (version->value().is_int()) {
            out.version = static_cast<double>(version->as_int());
        } else if (!version->is_none()) {
            version->fail("a number");
        }
    }
    out.vocabulary = read_patterns(info, "vocabulary_parameter_patterns");
    out.tp_replicated = read_patterns(info, "tp_replicated_parameter_patterns");
    out.row_parallel = read_patterns(info, "parameter_with_row_parallelism_patterns");
    out.to_average = read_patterns(info, "parameter_to_average_patterns");
    out.two_sub_params_cat_dim_0 = read_patterns(info, "parameter_with_2_sub_params_cat_dim_0");
    out.pipeline_replicated = read_patterns(info, "pipeline_replicated_parameter_patterns");
    out.original_vocab_size = optional_int(info, "original_vocab_size");
    out.padded_vocab_size = optional_int(info, "padded_vocab_size");

    std::optional<Field> widths = info.find("sub_param_shard_widths");
    if (widths && (widths->is_none() || !widths->is_dict())) {
        widths.reset();
    }
    if (std::optional<Field> subs = info.find("parameter_with_sub_params");
        subs && !subs->is_none()) {
        for (const Field& entry : subs->elements()) {
            if (!entry.is_dict()) {
                entry.fail("a dict with patterns, shape and partition_dim");
            }
            SubParamsSpec spec;
            spec.patterns = read_patterns(entry, "patterns");
            spec.partition_dim = non_negative(entry.at("partition_dim"));
            Field recorded = entry.at("shape");
            spec.shape_is_tuple = recorded.value().get<pickle::Tuple>() != nullptr;
            std::vector<Field> shape = recorded.elements();
            for (const Field& dim : shape) {
                checkpoint::SubParamShapeDim value;
                if (dim.value().is_int()) {
                    value.values.push_back(dim.as_int());
                } else if (dim.is_list_like()) {
                    value.kind = dim.value().get<pickle::Tuple>() != nullptr
                                     ? SubParamShapeDim::Kind::kTuple
                                     : SubParamShapeDim::Kind::kList;
                    for (const Field& size : dim.elements())
                        value.values.push_back(size.as_int());
                } else {
                    dim.fail("an int or a tuple of ints");
                }
                spec.shape.push_back(std::move(value));
            }
            if (spec.partition_dim >= shape.size()) {
                entry.at("partition_dim").fail("a dimension of the recorded shape");
            }
            const Field& at_dim = shape[spec.partition_dim];
            if (at_dim.is_list_like()) {
                spec.sub_sizes = read_uints(at_dim);
            } else {
                spec.sub_count = non_negative(at_dim);
            }
            if (widths) {
                for (const std::string& pattern : spec.patterns) {
                    if (std::optional<Field> per_pattern = widths->find(pattern)) {
                        for (const Field& sub : per_pattern->elements()) {
                            spec.shard_widths.push_back(read_uints(sub));
                        }
                        break;
                    }
                }
            }
            out.sub_params.push_back(std::move(spec));
        }
    }
    std::optional<Field> unsupported = info.find("autotp_unsupported_parameter_patterns");
    out.autotp = unsupported && !unsupported->is_none();
    if (unsupported && unsupported->is_dict()) {
        for (const auto& [pattern, reason] : unsupported->entries()) {
            out.unsupported.emplace_back(
                pattern, reason.value().string() ? reason.as_string() : std::string("unknown"));
        }
    }
    return out;
}

// fragment_address(numel, start): a dataclass pickled as an instance whose BUILD state is its
// __dict__, or (namedtuple-like) constructor arguments (numel, start).
SliceMapping read_fragment(const std::string& name, const Field& value) {
    std::optional<Field::InstanceParts> parts = value.instance_parts();
    if (!parts) {
        value.fail("a fragment_address(numel, start)");
    }
    SliceMapping mapping{name, 0, 0};
    if (parts->state.is_dict()) {
        mapping.numel = non_negative(parts->state.at("numel"));
        mapping.start = non_negative(parts->state.at("start"));
    } else if (parts->args.is_list_like() && parts->args.elements().size() == 2) {
        std::vector<Field> args = parts->args.elements();
        mapping.numel = non_negative(args[0]);
        mapping.start = non_negative(args[1]);
    } else {
        value.fail("a fragment_address with numel and start");
    }
    return mapping;
}

}  // namespace

ParallelModelExtras read_parallel_model_extras(const container::TorchFile& file) {
    Field root = top_dict(file, "the dict of a DeepSpeed model-states file");
    ParallelModelExtras extras;
    if (std::optional<Field> info = root.find("universal_checkpoint_info");
        info && !info->is_none()) {
        if (!info->is_dict()) {
            info->fail("a dict of merge rules");
        }
        extras.universal_info = read_universal_info(*info);
    }
    if (std::optional<Field> experts = root.find("num_experts"); experts && !experts->is_none()) {
        if (experts->value().is_int()) {
            extras.num_experts.push_back(experts->as_int());
        } else {
            for (const Field& count : experts->elements()) {
                extras.num_experts.push_back(count.as_int());
            }
        }
        for (std::int64_t count : extras.num_experts) {
            if (count < 1) {
                experts->fail("positive expert counts");
            }
        }
    }
    if (std::optional<Field> optimizer = root.find("optimizer");
        optimizer && optimizer->is_dict()) {
        // A torch optimizer.state_dict(), or a 16-bit wrapper's around it.
        extras.has_plain_optimizer_state = optimizer->find("state").has_value() ||
                                           optimizer->find("optimizer_state_dict").has_value();
    }
    return extras;
}

ParallelOptimExtras read_parallel_optim_extras(const container::TorchFile& file) {
    Field root = top_dict(file, "the dict of a DeepSpeed optimizer-states file");
    ParallelOptimExtras extras;
    std::optional<Field> osd = root.find("optimizer_state_dict");
    if (!osd || !osd->is_dict()) {
        return extras;
    }
    std::optional<Field> mappings = osd->find("param_slice_mappings");
    if (!mappings || mappings->is_none()) {
        return extras;
    }
    std::vector<Field> param_groups;
    if (std::optional<Field> base = osd->find("base_optimizer_state"); base && base->is_dict()) {
        if (std::optional<Field> groups = base->find("param_groups");
            groups && groups->is_list_like()) {
            param_groups = groups->elements();
        }
    }
    std::vector<Field> groups = mappings->elements();
    for (std::size_t g = 0; g < groups.size(); ++g) {
        OptimGroupExtras group;
        if (g < param_groups.size() && param_groups[g].is_dict()) {
            if (std::optional<Field> name = param_groups[g].find("name");
                name && name->value().string()) {
                group.name = name->as_string();
            }
            if (std::optional<Field> moe = param_groups[g].find("moe");
                moe && moe->value().is_bool()) {
                group.moe = moe->value().as_bool();
            }
        }
        for (const auto& [name, fragment] : groups[g].entries()) {
            group.slices.push_back(read_fragment(name, fragment));
        }
        extras.groups.push_back(std::move(group));
    }
    return extras;
}

StateDictInfo read_state_dict_file(const container::TorchFile& file, std::uint32_t file_index) {
    Field root = top_dict(file, "a state dict (name -> tensor)");
    StateDictInfo info;
    for (const auto& [name, value] : root.entries()) {
        if (value.value().get<pickle::Tensor>() != nullptr) {
            info.tensors.push_back({name, value.as_tensor(file_index)});
        }
    }
    return info;
}

}  // namespace z2f::checkpoint
