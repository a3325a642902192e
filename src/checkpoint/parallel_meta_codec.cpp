#include "checkpoint/parallel_meta_codec.hpp"

#include <bit>

#include "checkpoint/meta_codec.hpp"

namespace z2f::checkpoint {
namespace {

constexpr std::size_t kMinString = 8;
constexpr std::size_t kMinSequence = 8;

enum class FileKind : std::uint8_t { kModel, kOptim, kStateDict };

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
    encode_named_tensors(extras.zero0_masters.masters, out);
}

ParallelModelExtras get_model_extras(WireReader& in) {
    ParallelModelExtras extras;
    extras.universal_info = in.optional(get_universal);
    extras.num_experts = in.sequence(8, [](WireReader& r) { return r.i64(); });
    extras.has_plain_optimizer_state = in.boolean();
    extras.zero0_masters.key = in.str();
    extras.zero0_masters.tensors = in.u64();
    extras.zero0_masters.masters = decode_named_tensors(in);
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

}  // namespace

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

void encode_parallel_file_meta(const ParallelFileMeta& meta, WireWriter& out) {
    out.u64(meta.size);
    if (const auto* model = std::get_if<ParallelModelFile>(&meta.info)) {
        out.enumerator(FileKind::kModel);
        encode_model_states(model->states, out);
        put_model_extras(out, model->extras);
    } else if (const auto* optim = std::get_if<ParallelOptimFile>(&meta.info)) {
        out.enumerator(FileKind::kOptim);
        encode_optim_states(optim->states, out);
        put_optim_extras(out, optim->extras);
    } else {
        out.enumerator(FileKind::kStateDict);
        encode_named_tensors(std::get<StateDictInfo>(meta.info).tensors, out);
    }
    encode_records(meta.records, out);
}

ParallelFileMeta decode_parallel_file_meta(WireReader& in) {
    ParallelFileMeta meta;
    meta.size = in.u64();
    switch (in.enumerator(FileKind::kStateDict)) {
        case FileKind::kModel: {
            ParallelModelFile model;
            model.states = decode_model_states(in);
            model.extras = get_model_extras(in);
            meta.info = std::move(model);
            break;
        }
        case FileKind::kOptim: {
            ParallelOptimFile optim;
            optim.states = decode_optim_states(in);
            optim.extras = get_optim_extras(in);
            meta.info = std::move(optim);
            break;
        }
        case FileKind::kStateDict:
            meta.info = StateDictInfo{decode_named_tensors(in)};
            break;
    }
    meta.records = decode_records(in);
    return meta;
}

}  // namespace z2f::checkpoint
