#include "checkpoint/universal_assemble.hpp"

#include <algorithm>
#include <unordered_map>

#include "checkpoint/autoep_views.hpp"
#include "checkpoint/field.hpp"
#include "checkpoint/sequence_parallel.hpp"
#include "checkpoint/universal_discovery.hpp"
#include "common/checked_math.hpp"
#include "common/errors.hpp"

namespace z2f::checkpoint {

std::vector<InputFileSpec> universal_inputs(const UniversalFolder& folder) {
    const CheckpointFiles& files = folder.files;
    std::vector<InputFileSpec> inputs;
    for (std::size_t i = 0; i < files.model_files.size(); ++i) {
        inputs.push_back({files.model_files[i], i == 0 ? InputKind::kFirstModel
                                                : files.per_rank_model_files
                                                    ? InputKind::kOtherModel
                                                    : InputKind::kModelParallelRank});
    }
    for (const std::string& param : folder.params) {
        inputs.push_back({universal_fp32_path(folder, param), InputKind::kUniversalParam});
    }
    return inputs;
}

OptimStatesInfo read_universal_param(const container::TorchFile& file, std::uint32_t file_index) {
    Field root(file, file.root(), "");
    Field tensor = root;
    if (root.is_dict()) {
        tensor = root.at("param");
    } else if (file.root().get<pickle::Tensor>() == nullptr) {
        root.fail("a tensor or a dict with 'param' (a universal checkpoint's fp32.pt)");
    }
    TensorRef ref = tensor.as_tensor(file_index);
    if (!is_floating(ref.dtype)) {
        tensor.fail("a floating-point fp32 master");
    }
    OptimStatesInfo info;
    info.layout = MasterLayout::kWholeParams;
    info.master.push_back(std::move(ref));
    return info;
}

namespace {

// A fused AutoEP expert weight whose file holds every expert-parallel rank's experts:
// [num_experts, ...] where param_shapes has [num_local_experts, ...].
bool is_fused_experts(const ModelStatesInfo& model, const NamedShape& shape,
                      const TensorRef& stored) {
    const AutoEpLayer* layer = autoep_layer_of(model.autoep.layers, shape.name);
    return layer != nullptr && !shape.shape.empty() && !stored.shape.empty() &&
           shape.shape.front() == layer->num_local_experts &&
           stored.shape.front() == layer->num_experts &&
           std::equal(shape.shape.begin() + 1, shape.shape.end(), stored.shape.begin() + 1,
                      stored.shape.end());
}

// The model of a universal checkpoint of a tensor- or pipeline-parallel run, from its
// mp_rank_MM files (mp order; docs/universal-checkpoint.md §10): the first file's facts, with
// param_shapes holding every file's groups in turn, each name once (the TP ranks list the same
// names; a tied pipeline weight is in every stage that uses it). Shapes stay the local ones;
// assemble_universal_meta takes the merged shape from the parameter's file where it differs.
ModelStatesInfo merge_model_parallel_ranks(const std::vector<ModelStatesInfo>& models,
                                           const std::vector<std::string>& paths,
                                           std::vector<std::string>& warnings) {
    ModelStatesInfo merged = models.front();
    const std::string& first = paths.front();
    if (merged.mp_world_size > 0 &&
        static_cast<std::uint64_t>(merged.mp_world_size) != models.size()) {
        throw_input_error(first, "mp_world_size is " + std::to_string(merged.mp_world_size) +
                                     " but the universal folder holds " +
                                     std::to_string(models.size()) +
                                     " mp_rank_MM_model_states.pt files");
    }
    bool pipeline = false;
    bool split = false;  // some rank holds its own slices of the module (TP)
    for (std::size_t i = 0; i < models.size(); ++i) {
        const ModelStatesInfo& model = models[i];
        pipeline = pipeline || model.module_is_none;
        split = split || (i > 0 && !model.module_is_none);
        if (!model.param_shapes) {
            throw_input_error(paths[i],
                              "has no param_shapes: the parameters of the universal checkpoint "
                              "cannot be named and shaped");
        }
    }
    std::vector<std::vector<NamedShape>> groups;
    std::unordered_map<std::string, bool> seen;
    for (const ModelStatesInfo& model : models) {
        for (const auto& group : *model.param_shapes) {
            std::vector<NamedShape> fresh;
            for (const NamedShape& shape : group) {
                if (seen.emplace(shape.name, true).second)
                    fresh.push_back(shape);
            }
            if (!fresh.empty())
                groups.push_back(std::move(fresh));
        }
    }
    merged.param_shapes = std::move(groups);
    merged.module_is_none = false;
    merged.tp_degree = -1;
    merged.pp_degree = -1;
    merged.mp_world_size = -1;
    if (split) {
        // The module holds TP rank 0's slices: a frozen parameter among them would need the TP
        // merge rules, which a universal checkpoint does not keep.
        std::unordered_map<std::string, bool> known = seen;
        for (const std::string& buffer : merged.buffer_names)
            known.emplace(buffer, true);
        const bool frozen =
            (merged.frozen_param_shapes && !merged.frozen_param_shapes->empty()) ||
            std::any_of(merged.module_tensors.begin(), merged.module_tensors.end(),
                        [&](const NamedTensor& entry) { return known.count(entry.name) == 0; });
        if (frozen) {
            throw_unsupported(first,
                              "a universal checkpoint of a tensor-parallel run with frozen "
                              "parameters: their TP slices are in the model files only, and "
                              "the merge rules are not kept; convert the original checkpoint");
        }
    }
    if (pipeline) {
        merged.module_tensors.clear();
        merged.frozen_param_shapes.reset();
        for (const ModelStatesInfo& model : models) {
            if (!model.buffer_names.empty()) {
                throw_unsupported(first,
                                  "a universal checkpoint of a pipeline whose layers have "
                                  "buffers: they live in the layer files, which a universal "
                                  "checkpoint does not hold; convert the original checkpoint");
            }
        }
        warnings.push_back(first +
                           ": a universal checkpoint of a pipeline: frozen parameters live in the "
                           "layer files, which a universal checkpoint does not hold; only the "
                           "trainable parameters are converted (convert the original checkpoint "
                           "for the others)");
    }
    return merged;
}

}  // namespace

CheckpointMeta assemble_universal_meta(const UniversalFolder& folder, std::vector<FileMeta> metas) {
    const CheckpointFiles& files = folder.files;
    std::vector<InputFileSpec> inputs = universal_inputs(folder);
    if (metas.size() != inputs.size()) {
        throw_internal_error("metadata of " + std::to_string(metas.size()) + " files for " +
                             std::to_string(inputs.size()) + " universal inputs");
    }
    CheckpointMeta meta;
    meta.files = files;
    // Parameter folder -> its fp32 master.
    std::unordered_map<std::string, TensorRef> by_name;
    std::vector<ModelStatesInfo> ranks;  // the mp_rank files of a model-parallel run
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        meta.inputs.push_back(inputs[i].path);
        meta.input_sizes.push_back(metas[i].size);
        meta.records.insert(meta.records.end(), metas[i].records.begin(), metas[i].records.end());
        const bool is_model = inputs[i].kind != InputKind::kUniversalParam;
        if (is_model != std::holds_alternative<ModelFile>(metas[i].info) ||
            (!is_model && !std::holds_alternative<OptimFile>(metas[i].info))) {
            throw_internal_error("metadata kind does not match input " + inputs[i].path);
        }
        if (inputs[i].kind == InputKind::kFirstModel) {
            meta.model = std::get<ModelFile>(std::move(metas[i].info)).states;
            meta.frozen_fragments_by_rank.push_back(meta.model.frozen_param_fragments);
        } else if (inputs[i].kind == InputKind::kModelParallelRank) {
            ranks.push_back(std::get<ModelFile>(std::move(metas[i].info)).states);
        } else if (inputs[i].kind == InputKind::kOtherModel) {
            meta.frozen_fragments_by_rank.push_back(
                std::get<ModelFile>(std::move(metas[i].info)).states.frozen_param_fragments);
        } else {
            const OptimStatesInfo& optim = std::get<OptimFile>(metas[i].info).states;
            if (optim.layout != MasterLayout::kWholeParams || optim.master.size() != 1) {
                throw_internal_error("universal parameter metadata of " + inputs[i].path);
            }
            const std::size_t param = i - files.model_files.size();
            by_name.emplace(folder.params.at(param), optim.master.front());
        }
    }

    const std::string& model_path = files.model_files.front();
    const bool model_parallel = !ranks.empty();
    if (model_parallel) {
        ranks.insert(ranks.begin(), meta.model);
        meta.model = merge_model_parallel_ranks(ranks, files.model_files, meta.warnings);
    }
    const ModelStatesInfo& model = meta.model;
    if (model.module_is_none || records_model_parallelism(model)) {
        throw_unsupported(model_path,
                          "universal checkpoint of a tensor- or pipeline-parallel run whose "
                          "other mp_rank_MM_model_states.pt files are missing");
    }
    if (!model.param_shapes) {
        throw_input_error(model_path,
                          "has no param_shapes: the parameters of the universal checkpoint "
                          "cannot be named and shaped");
    }

    OptimStatesInfo whole;
    whole.layout = MasterLayout::kWholeParams;
    std::size_t used = 0;
    std::vector<NamedShape> merged_shapes;  // parameters whose file holds their merged shape
    for (const auto& group : *model.param_shapes) {
        for (const NamedShape& shape : group) {
            auto it = by_name.find(shape.name);
            const std::string path = universal_fp32_path(folder, shape.name);
            if (it == by_name.end()) {
                throw_input_error(path, "is missing: parameter '" + shape.name +
                                            "' of param_shapes has no fp32 master in the "
                                            "universal checkpoint");
            }
            const std::uint64_t numel = checked_numel(shape.shape).value_or(0);
            if ((model_parallel || is_fused_experts(model, shape, it->second)) &&
                it->second.numel != numel && it->second.shape.size() == shape.shape.size()) {
                // Merged over the TP ranks (and a vocabulary stripped of its padding), or an
                // AutoEP layer's experts of every expert-parallel rank: param_shapes has the
                // local shape, the file the whole one.
                whole.master.push_back(it->second);
                merged_shapes.push_back({shape.name, it->second.shape});
                ++used;
                continue;
            }
            if (it->second.numel != numel) {
                throw_input_error(path, "holds " + std::to_string(it->second.numel) +
                                            " elements, but parameter '" + shape.name + "' has " +
                                            std::to_string(numel) +
                                            " (param_shapes): padding left in by a converter?");
            }
            whole.master.push_back(it->second);
            ++used;
        }
    }
    if (!merged_shapes.empty()) {
        std::unordered_map<std::string, std::vector<std::uint64_t>> merged;
        for (NamedShape& shape : merged_shapes)
            merged.emplace(shape.name, std::move(shape.shape));
        for (auto& group : *meta.model.param_shapes) {
            for (NamedShape& shape : group) {
                auto it = merged.find(shape.name);
                if (it != merged.end())
                    shape.shape = it->second;
            }
        }
        meta.notes.push_back(std::to_string(merged.size()) +
                             " parameter(s) merged over the TP ranks: shapes from their files");
    }
    if (used != by_name.size()) {
        meta.notes.push_back(std::to_string(by_name.size() - used) + " parameter folder(s) under " +
                             files.tag_dir + "/zero are not in param_shapes and were ignored");
    }

    const bool stage3 = files.per_rank_model_files;
    const std::string first_name = model_path.substr(model_path.find_last_of('/') + 1);
    const bool zero3_names =
        parse_checkpoint_file_name(first_name).role == CheckpointFileRole::kRankModelStates;
    meta.layout = MasterLayout::kWholeParams;
    meta.zero_stage = zero3_names ? 3 : 2;
    meta.world_size = stage3 ? static_cast<std::uint32_t>(files.model_files.size())
                             : static_cast<std::uint32_t>(std::max<std::int64_t>(
                                   1, std::min<std::int64_t>(model.dp_world_size, 1 << 30)));
    whole.zero_stage = meta.zero_stage;
    whole.partition_count = {static_cast<std::int64_t>(meta.world_size)};
    meta.optim.push_back(std::move(whole));
    meta.ds_version = model.ds_version;
    meta.notes.push_back(std::string("universal checkpoint (converted from ZeRO ") +
                         (zero3_names ? "stage 3" : "stage 1/2") + ", data-parallel size " +
                         std::to_string(meta.world_size) + ")");
    if (!model.has_buffer_names) {
        meta.notes.push_back("no buffer_names in " + model_path + ": buffers are not exported");
    }
    if (model.autoep.present()) {
        // The router registered twice by AutoEP, as for the original checkpoint (autoep_views).
        std::vector<std::pair<std::string, std::string>> aliases =
            infer_router_aliases(model, model.autoep.layers);
        if (!aliases.empty()) {
            if (!meta.model.shared_params)
                meta.model.shared_params.emplace();
            meta.model.shared_params->insert(meta.model.shared_params->end(), aliases.begin(),
                                             aliases.end());
        }
    }
    return meta;
}

CheckpointMeta read_universal_checkpoint_meta(const UniversalFolder& folder) {
    std::vector<InputFileSpec> inputs = universal_inputs(folder);
    std::vector<FileMeta> metas;
    metas.reserve(inputs.size());
    for (std::size_t i = 0; i < inputs.size(); ++i)
        metas.push_back(read_file_meta(inputs[i], static_cast<std::uint32_t>(i)));
    return assemble_universal_meta(folder, std::move(metas));
}

}  // namespace z2f::checkpoint
