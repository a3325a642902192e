#include "checkpoint/meta_codec.hpp"

#include <bit>

namespace z2f::checkpoint {
namespace {

// Smallest wire size of a few elements, for the count checks of the reader.
constexpr std::size_t kMinString = 8;
constexpr std::size_t kMinTensor = 4 + 1 + 8 + 8 + 8 + 8;
constexpr std::size_t kMinShape = kMinString + 8;
constexpr std::size_t kMinNode = 1 + 8 + 8 + 2 * kMinString + 8 + 2;

constexpr std::size_t kMinSequence = 8;

enum class FileKind : std::uint8_t { kModel, kOptim, kStateDict };

void put_tensor(WireWriter& out, const TensorRef& tensor) {
    out.u32(tensor.file);
    out.enumerator(tensor.dtype);
    out.dims(tensor.shape);
    out.u64(tensor.numel);
    out.u64(tensor.offset);
    out.u64(tensor.length);
}

TensorRef get_tensor(WireReader& in) {
    TensorRef tensor;
    tensor.file = in.u32();
    tensor.dtype = in.enumerator(kLastDType);
    tensor.shape = in.dims();
    tensor.numel = in.u64();
    tensor.offset = in.u64();
    tensor.length = in.u64();
    return tensor;
}

void put_named_tensors(WireWriter& out, const std::vector<NamedTensor>& tensors) {
    out.sequence(tensors, [](WireWriter& w, const NamedTensor& named) {
        w.str(named.name);
        put_tensor(w, named.tensor);
    });
}

std::vector<NamedTensor> get_named_tensors(WireReader& in) {
    return in.sequence(kMinString + kMinTensor, [](WireReader& r) {
        NamedTensor named;
        named.name = r.str();
        named.tensor = get_tensor(r);
        return named;
    });
}

void put_shapes(WireWriter& out, const std::vector<NamedShape>& shapes) {
    out.sequence(shapes, [](WireWriter& w, const NamedShape& shape) {
        w.str(shape.name);
        w.dims(shape.shape);
    });
}

std::vector<NamedShape> get_shapes(WireReader& in) {
    return in.sequence(kMinShape, [](WireReader& r) {
        NamedShape shape;
        shape.name = r.str();
        shape.shape = r.dims();
        return shape;
    });
}

using ShapeGroups = std::vector<std::vector<NamedShape>>;

void put_groups(WireWriter& out, const std::optional<ShapeGroups>& groups) {
    out.optional(groups, [](WireWriter& w, const ShapeGroups& value) {
        w.sequence(value, [](WireWriter& g, const std::vector<NamedShape>& group) {
            put_shapes(g, group);
        });
    });
}

std::optional<ShapeGroups> get_groups(WireReader& in) {
    return in.optional([](WireReader& r) { return r.sequence(8, get_shapes); });
}

void put_ints(WireWriter& out, const std::vector<std::int64_t>& values) {
    out.sequence(values, [](WireWriter& w, std::int64_t value) { w.i64(value); });
}

std::vector<std::int64_t> get_ints(WireReader& in) {
    return in.sequence(8, [](WireReader& r) { return r.i64(); });
}

void put_model(WireWriter& out, const ModelStatesInfo& model) {
    out.str(model.ds_version);
    out.boolean(model.module_is_none);
    put_named_tensors(out, model.module_tensors);
    out.boolean(model.has_buffer_names);
    out.strings(model.buffer_names);
    put_groups(out, model.param_shapes);
    out.optional(model.frozen_param_shapes, put_shapes);
    put_named_tensors(out, model.frozen_param_fragments);
    using Pairs = std::vector<std::pair<std::string, std::string>>;
    out.optional(model.shared_params, [](WireWriter& w, const Pairs& pairs) {
        w.sequence(pairs, [](WireWriter& p, const std::pair<std::string, std::string>& pair) {
            p.str(pair.first);
            p.str(pair.second);
        });
    });
    out.i64(model.dp_world_size);
    out.i64(model.mp_world_size);
    out.i64(model.tp_degree);
    out.i64(model.pp_degree);
    put_autoep_info(out, model.autoep);
}

ModelStatesInfo get_model(WireReader& in) {
    ModelStatesInfo model;
    model.ds_version = in.str();
    model.module_is_none = in.boolean();
    model.module_tensors = get_named_tensors(in);
    model.has_buffer_names = in.boolean();
    model.buffer_names = in.strings();
    model.param_shapes = get_groups(in);
    model.frozen_param_shapes = in.optional(get_shapes);
    model.frozen_param_fragments = get_named_tensors(in);
    model.shared_params = in.optional([](WireReader& r) {
        return r.sequence(2 * kMinString, [](WireReader& p) {
            std::string alias = p.str();
            return std::pair<std::string, std::string>(std::move(alias), p.str());
        });
    });
    model.dp_world_size = in.i64();
    model.mp_world_size = in.i64();
    model.tp_degree = in.i64();
    model.pp_degree = in.i64();
    model.autoep = get_autoep_info(in);
    return model;
}

void put_step(WireWriter& out, const OptimizerStep& step) {
    out.enumerator(step.form);
    out.enumerator(step.dtype);
    out.dims(step.shape);
    out.u64(step.bits);
}

OptimizerStep get_step(WireReader& in) {
    OptimizerStep step;
    step.form = in.enumerator(OptimizerStep::Form::kFloat);
    step.dtype = in.enumerator(kLastDType);
    step.shape = in.dims();
    step.bits = in.u64();
    return step;
}

void put_group_state(WireWriter& out, const OptimizerGroupState& state) {
    out.optional(state.exp_avg, put_tensor);
    out.optional(state.exp_avg_sq, put_tensor);
    out.optional(state.step, put_step);
    out.strings(state.tensor_keys);
}

OptimizerGroupState get_group_state(WireReader& in) {
    OptimizerGroupState state;
    state.exp_avg = in.optional(get_tensor);
    state.exp_avg_sq = in.optional(get_tensor);
    state.step = in.optional(get_step);
    state.tensor_keys = in.strings();
    return state;
}

void put_node(WireWriter& out, const PickledNode& node) {
    out.enumerator(node.kind);
    out.i64(node.integer);
    out.u64(std::bit_cast<std::uint64_t>(node.real));
    out.str(node.text);
    out.str(node.name);
    out.sequence(node.children, [](WireWriter& w, std::uint32_t child) { w.u32(child); });
    out.boolean(node.via_newobj);
    out.boolean(node.has_state);
}

PickledNode get_node(WireReader& in, std::size_t index) {
    PickledNode node;
    node.kind = in.enumerator(PickledNode::kLastKind);
    node.integer = in.i64();
    node.real = std::bit_cast<double>(in.u64());
    node.text = in.str();
    node.name = in.str();
    node.children = in.sequence(4, [](WireReader& r) { return r.u32(); });
    for (std::uint32_t child : node.children) {
        if (child >= index) {
            in.malformed("pickled value node refers to a later node");
        }
    }
    node.via_newobj = in.boolean();
    node.has_state = in.boolean();
    return node;
}

void put_global_state(WireWriter& out, const OptimizerGlobalState& state) {
    out.sequence(state.graph.nodes, put_node);
    out.sequence(state.entries, [](WireWriter& w, const PickledEntry& entry) {
        w.str(entry.key);
        w.u32(entry.key_node);
        w.u32(entry.value_node);
    });
    out.optional(state.param_groups, [](WireWriter& w, std::uint32_t node) { w.u32(node); });
}

OptimizerGlobalState get_global_state(WireReader& in) {
    OptimizerGlobalState state;
    std::size_t count = in.count(kMinNode);
    state.graph.nodes.reserve(count);
    for (std::size_t i = 0; i < count; ++i) {
        state.graph.nodes.push_back(get_node(in, i));
    }
    const std::size_t nodes = state.graph.nodes.size();
    auto node_index = [&](WireReader& r) {
        std::uint32_t index = r.u32();
        if (index >= nodes) {
            r.malformed("pickled value node index out of range");
        }
        return index;
    };
    state.entries = in.sequence(kMinString + 8, [&](WireReader& r) {
        PickledEntry entry;
        entry.key = r.str();
        entry.key_node = node_index(r);
        entry.value_node = node_index(r);
        return entry;
    });
    state.param_groups = in.optional(node_index);
    return state;
}

void put_optim(WireWriter& out, const OptimStatesInfo& optim) {
    out.str(optim.ds_version);
    out.enumerator(optim.layout);
    out.i64(optim.zero_stage);
    put_ints(out, optim.partition_count);
    out.sequence(optim.master, put_tensor);
    put_groups(out, optim.param_shapes);
    put_partition_groups(out, optim.partition_groups);
    out.sequence(optim.group_states, put_group_state);
    put_global_state(out, optim.global_state);
}

OptimStatesInfo get_optim(WireReader& in) {
    OptimStatesInfo optim;
    optim.ds_version = in.str();
    optim.layout = in.enumerator(kLastMasterLayout);
    optim.zero_stage = in.i64();
    optim.partition_count = get_ints(in);
    optim.master = in.sequence(kMinTensor, get_tensor);
    optim.param_shapes = get_groups(in);
    optim.partition_groups = get_partition_groups(in);
    optim.group_states = in.sequence(3 + kMinString, get_group_state);
    optim.global_state = get_global_state(in);
    return optim;
}

void put_uints(WireWriter& out, const std::vector<std::uint64_t>& values) {
    out.dims(values);
}

void put_sub_params(WireWriter& out, const SubParamsSpec& spec) {
    out.strings(spec.patterns);
    out.u64(spec.partition_dim);
    put_uints(out, spec.sub_sizes);
    out.u64(spec.sub_count);
    out.sequence(spec.shard_widths, put_uints);
    out.sequence(spec.shape, [](WireWriter& w, const SubParamShapeDim& dim) {
        w.enumerator(dim.kind);
        w.sequence(dim.values, [](WireWriter& v, std::int64_t value) { v.i64(value); });
    });
    out.boolean(spec.shape_is_tuple);
}

SubParamsSpec get_sub_params(WireReader& in) {
    SubParamsSpec spec;
    spec.patterns = in.strings();
    spec.partition_dim = in.u64();
    spec.sub_sizes = in.dims();
    spec.sub_count = in.u64();
    spec.shard_widths = in.sequence(kMinSequence, [](WireReader& r) { return r.dims(); });
    spec.shape = in.sequence(1 + kMinSequence, [](WireReader& r) {
        SubParamShapeDim dim;
        dim.kind = r.enumerator(SubParamShapeDim::Kind::kList);
        dim.values = r.sequence(8, [](WireReader& v) { return v.i64(); });
        return dim;
    });
    spec.shape_is_tuple = in.boolean();
    return spec;
}

void put_universal(WireWriter& out, const UniversalCheckpointInfo& info) {
    out.u64(std::bit_cast<std::uint64_t>(info.version));
    out.strings(info.vocabulary);
    out.strings(info.tp_replicated);
    out.strings(info.row_parallel);
    out.strings(info.to_average);
    out.strings(info.two_sub_params_cat_dim_0);
    out.strings(info.pipeline_replicated);
    out.sequence(info.sub_params, put_sub_params);
    out.sequence(info.unsupported,
                 [](WireWriter& w, const std::pair<std::string, std::string>& entry) {
                     w.str(entry.first);
                     w.str(entry.second);
                 });
    out.i64(info.original_vocab_size);
    out.i64(info.padded_vocab_size);
    out.boolean(info.autotp);
}

UniversalCheckpointInfo get_universal(WireReader& in) {
    UniversalCheckpointInfo info;
    info.version = std::bit_cast<double>(in.u64());
    info.vocabulary = in.strings();
    info.tp_replicated = in.strings();
    info.row_parallel = in.strings();
    info.to_average = in.strings();
    info.two_sub_params_cat_dim_0 = in.strings();
    info.pipeline_replicated = in.strings();
    info.sub_params = in.sequence(4 * kMinSequence + 16, get_sub_params);
    info.unsupported = in.sequence(2 * kMinString, [](WireReader& r) {
        std::string pattern = r.str();
        return std::pair<std::string, std::string>(std::move(pattern), r.str());
    });
    info.original_vocab_size = in.i64();
    info.padded_vocab_size = in.i64();
    info.autotp = in.boolean();
    return info;
}

void put_model_extras(WireWriter& out, const ParallelModelExtras& extras) {
    out.optional(extras.universal_info, put_universal);
    out.sequence(extras.num_experts, [](WireWriter& w, std::int64_t n) { w.i64(n); });
    out.boolean(extras.has_plain_optimizer_state);
    out.str(extras.zero0_masters.key);
    out.u64(extras.zero0_masters.tensors);
    put_named_tensors(out, extras.zero0_masters.masters);
}

ParallelModelExtras get_model_extras(WireReader& in) {
    ParallelModelExtras extras;
    extras.universal_info = in.optional(get_universal);
    extras.num_experts = in.sequence(8, [](WireReader& r) { return r.i64(); });
    extras.has_plain_optimizer_state = in.boolean();
    extras.zero0_masters.key = in.str();
    extras.zero0_masters.tensors = in.u64();
    extras.zero0_masters.masters = get_named_tensors(in);
    return extras;
}

void put_optim_extras(WireWriter& out, const ParallelOptimExtras& extras) {
    out.sequence(extras.groups, [](WireWriter& w, const OptimGroupExtras& group) {
        w.str(group.name);
        w.boolean(group.moe);
        w.sequence(group.slices, [](WireWriter& s, const SliceMapping& slice) {
            s.str(slice.name);
            s.u64(slice.start);
            s.u64(slice.numel);
        });
    });
}

ParallelOptimExtras get_optim_extras(WireReader& in) {
    ParallelOptimExtras extras;
    extras.groups = in.sequence(kMinString + 1 + kMinSequence, [](WireReader& r) {
        OptimGroupExtras group;
        group.name = r.str();
        group.moe = r.boolean();
        group.slices = r.sequence(kMinString + 16, [](WireReader& s) {
            SliceMapping slice;
            slice.name = s.str();
            slice.start = s.u64();
            slice.numel = s.u64();
            return slice;
        });
        return group;
    });
    return extras;
}

void put_string_grid(WireWriter& out, const std::vector<std::vector<std::string>>& grid) {
    out.sequence(grid, [](WireWriter& w, const std::vector<std::string>& row) { w.strings(row); });
}

std::vector<std::vector<std::string>> get_string_grid(WireReader& in) {
    return in.sequence(kMinSequence, [](WireReader& r) { return r.strings(); });
}

void put_records(WireWriter& out, const std::vector<InputRecord>& records) {
    out.sequence(records, [](WireWriter& w, const InputRecord& record) {
        w.u32(record.file);
        w.u64(record.offset);
        w.u64(record.length);
        w.u32(record.crc32);
        w.str(record.name);
        w.boolean(record.format_has_no_crc);
    });
}

std::vector<InputRecord> get_records(WireReader& in) {
    return in.sequence(4 + 8 + 8 + 4 + kMinString + 1, [](WireReader& r) {
        InputRecord record;
        record.file = r.u32();
        record.offset = r.u64();
        record.length = r.u64();
        record.crc32 = r.u32();
        record.name = r.str();
        record.format_has_no_crc = r.boolean();
        return record;
    });
}

void put_files(WireWriter& out, const CheckpointFiles& files) {
    out.str(files.checkpoint_dir);
    out.str(files.tag);
    out.str(files.tag_dir);
    out.strings(files.model_files);
    out.boolean(files.per_rank_model_files);
    out.strings(files.optim_files);
    out.str(files.optim_prefix);
    out.dims(files.optim_mp_ranks);
    out.dims(files.model_mp_ranks);
    out.boolean(files.has_offloaded_tensors);
}

CheckpointFiles get_files(WireReader& in) {
    CheckpointFiles files;
    files.checkpoint_dir = in.str();
    files.tag = in.str();
    files.tag_dir = in.str();
    files.model_files = in.strings();
    files.per_rank_model_files = in.boolean();
    files.optim_files = in.strings();
    files.optim_prefix = in.str();
    files.optim_mp_ranks = in.dims();
    files.model_mp_ranks = in.dims();
    files.has_offloaded_tensors = in.boolean();
    return files;
}

}  // namespace

std::vector<std::byte> encode_files(const CheckpointFiles& files) {
    WireWriter out;
    put_files(out, files);
    return out.take();
}

CheckpointFiles decode_files(std::span<const std::byte> bytes) {
    WireReader in(bytes, "checkpoint file list");
    CheckpointFiles files = get_files(in);
    in.expect_end();
    return files;
}

std::vector<std::byte> encode_universal_folder(const UniversalFolder& folder) {
    WireWriter out;
    put_files(out, folder.files);
    out.strings(folder.params);
    return out.take();
}

UniversalFolder decode_universal_folder(std::span<const std::byte> bytes) {
    WireReader in(bytes, "universal checkpoint folder");
    UniversalFolder folder;
    folder.files = get_files(in);
    folder.params = in.strings();
    in.expect_end();
    return folder;
}

std::vector<std::byte> encode_file_grid(const FileGrid& grid) {
    WireWriter out;
    out.str(grid.folder.checkpoint_dir);
    out.str(grid.folder.tag);
    out.str(grid.folder.tag_dir);
    out.strings(grid.model_files);
    put_string_grid(out, grid.optim_files);
    out.str(grid.optim_prefix);
    put_string_grid(out, grid.zero3_model_files);
    out.sequence(grid.layer_files, [](WireWriter& w, const LayerFile& layer) {
        w.u64(layer.layer);
        w.u64(layer.tp_rank);
        w.str(layer.path);
    });
    out.boolean(grid.layer_files_have_tp_rank);
    out.sequence(grid.expert_files, [](WireWriter& w, const ExpertFile& expert) {
        w.i64(expert.moe_layer);
        w.u64(expert.expert);
        w.u64(expert.mp_rank);
        w.str(expert.path);
    });
    put_string_grid(out, grid.expert_optim_files);
    out.boolean(grid.has_offloaded_tensors);
    out.u32(grid.tp_degree);
    out.u32(grid.pp_degree);
    return out.take();
}

FileGrid decode_file_grid(std::span<const std::byte> bytes) {
    WireReader in(bytes, "checkpoint file grid");
    FileGrid grid;
    grid.folder.checkpoint_dir = in.str();
    grid.folder.tag = in.str();
    grid.folder.tag_dir = in.str();
    grid.model_files = in.strings();
    grid.optim_files = get_string_grid(in);
    grid.optim_prefix = in.str();
    grid.zero3_model_files = get_string_grid(in);
    grid.layer_files = in.sequence(16 + kMinString, [](WireReader& r) {
        LayerFile layer;
        layer.layer = r.u64();
        layer.tp_rank = r.u64();
        layer.path = r.str();
        return layer;
    });
    grid.layer_files_have_tp_rank = in.boolean();
    grid.expert_files = in.sequence(24 + kMinString, [](WireReader& r) {
        ExpertFile expert;
        expert.moe_layer = r.i64();
        expert.expert = r.u64();
        expert.mp_rank = r.u64();
        expert.path = r.str();
        return expert;
    });
    grid.expert_optim_files = get_string_grid(in);
    grid.has_offloaded_tensors = in.boolean();
    grid.tp_degree = in.u32();
    grid.pp_degree = in.u32();
    in.expect_end();
    return grid;
}

void encode_file_meta(const FileMeta& meta, WireWriter& out) {
    out.u64(meta.size);
    if (const auto* model = std::get_if<ModelFile>(&meta.info)) {
        out.enumerator(FileKind::kModel);
        put_model(out, model->states);
        put_model_extras(out, model->extras);
    } else if (const auto* optim = std::get_if<OptimFile>(&meta.info)) {
        out.enumerator(FileKind::kOptim);
        put_optim(out, optim->states);
        put_optim_extras(out, optim->extras);
    } else {
        out.enumerator(FileKind::kStateDict);
        put_named_tensors(out, std::get<StateDictInfo>(meta.info).tensors);
    }
    put_records(out, meta.records);
}

FileMeta decode_file_meta(WireReader& in) {
    FileMeta meta;
    meta.size = in.u64();
    switch (in.enumerator(FileKind::kStateDict)) {
        case FileKind::kModel: {
            ModelFile model;
            model.states = get_model(in);
            model.extras = get_model_extras(in);
            meta.info = std::move(model);
            break;
        }
        case FileKind::kOptim: {
            OptimFile optim;
            optim.states = get_optim(in);
            optim.extras = get_optim_extras(in);
            meta.info = std::move(optim);
            break;
        }
        case FileKind::kStateDict:
            meta.info = StateDictInfo{get_named_tensors(in)};
            break;
    }
    meta.records = get_records(in);
    return meta;
}

}  // namespace z2f::checkpoint
