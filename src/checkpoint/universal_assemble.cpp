#include "checkpoint/universal_assemble.hpp"

#include <algorithm>
#include <unordered_map>

#include "checkpoint/field.hpp"
#include "checkpoint/universal_discovery.hpp"
#include "common/checked_math.hpp"
#include "common/errors.hpp"

namespace z2f::checkpoint {

std::vector<InputFileSpec> universal_inputs(const CheckpointFiles& files) {
    std::vector<InputFileSpec> inputs;
    for (std::size_t i = 0; i < files.model_files.size(); ++i) {
        inputs.push_back(
            {files.model_files[i], i == 0 ? InputKind::kFirstModel : InputKind::kOtherModel});
    }
    for (const std::string& param : files.universal_params) {
        inputs.push_back({universal_fp32_path(files, param), InputKind::kUniversalParam});
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

CheckpointMeta assemble_universal_meta(const CheckpointFiles& files, std::vector<FileMeta> metas) {
    std::vector<InputFileSpec> inputs = universal_inputs(files);
    if (metas.size() != inputs.size()) {
        throw_internal_error("metadata of " + std::to_string(metas.size()) + " files for " +
                             std::to_string(inputs.size()) + " universal inputs");
    }
    CheckpointMeta meta;
    meta.files = files;
    // Parameter folder -> its fp32 master.
    std::unordered_map<std::string, TensorRef> by_name;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        meta.inputs.push_back(inputs[i].path);
        meta.input_sizes.push_back(metas[i].size);
        meta.records.insert(meta.records.end(), metas[i].records.begin(), metas[i].records.end());
        const bool is_model = inputs[i].kind != InputKind::kUniversalParam;
        if (is_model != std::holds_alternative<ModelStatesInfo>(metas[i].info)) {
            throw_internal_error("metadata kind does not match input " + inputs[i].path);
        }
        if (inputs[i].kind == InputKind::kFirstModel) {
            meta.model = std::get<ModelStatesInfo>(std::move(metas[i].info));
            meta.frozen_fragments_by_rank.push_back(meta.model.frozen_param_fragments);
        } else if (inputs[i].kind == InputKind::kOtherModel) {
            meta.frozen_fragments_by_rank.push_back(
                std::get<ModelStatesInfo>(std::move(metas[i].info)).frozen_param_fragments);
        } else {
            const auto& optim = std::get<OptimStatesInfo>(metas[i].info);
            if (optim.layout != MasterLayout::kWholeParams || optim.master.size() != 1) {
                throw_internal_error("universal parameter metadata of " + inputs[i].path);
            }
            const std::size_t param = i - files.model_files.size();
            by_name.emplace(files.universal_params.at(param), optim.master.front());
        }
    }

    const std::string& model_path = files.model_files.front();
    const ModelStatesInfo& model = meta.model;
    if (model.module_is_none || model.tp_degree > 1 || model.pp_degree > 1 ||
        model.mp_world_size > 1) {
        throw_unsupported(model_path,
                          "universal checkpoint of a tensor- or pipeline-parallel run: only "
                          "data-parallel ones are converted");
    }
    if (!model.param_shapes) {
        throw_input_error(model_path,
                          "has no param_shapes: the parameters of the universal checkpoint "
                          "cannot be named and shaped");
    }

    OptimStatesInfo whole;
    whole.layout = MasterLayout::kWholeParams;
    std::size_t used = 0;
    for (const auto& group : *model.param_shapes) {
        for (const NamedShape& shape : group) {
            auto it = by_name.find(shape.name);
            const std::string path = universal_fp32_path(files, shape.name);
            if (it == by_name.end()) {
                throw_input_error(path, "is missing: parameter '" + shape.name +
                                            "' of param_shapes has no fp32 master in the "
                                            "universal checkpoint");
            }
            const std::uint64_t numel = checked_numel(shape.shape).value_or(0);
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
    if (used != by_name.size()) {
        meta.notes.push_back(std::to_string(by_name.size() - used) + " parameter folder(s) under " +
                             files.tag_dir + "/zero are not in param_shapes and were ignored");
    }

    const bool stage3 = files.per_rank_model_files;
    meta.layout = MasterLayout::kWholeParams;
    meta.zero_stage = stage3 ? 3 : 2;
    meta.world_size = stage3 ? static_cast<std::uint32_t>(files.model_files.size())
                             : static_cast<std::uint32_t>(std::max<std::int64_t>(
                                   1, std::min<std::int64_t>(model.dp_world_size, 1 << 30)));
    whole.zero_stage = meta.zero_stage;
    whole.partition_count = {static_cast<std::int64_t>(meta.world_size)};
    meta.optim.push_back(std::move(whole));
    meta.ds_version = model.ds_version;
    meta.notes.push_back(std::string("universal checkpoint (converted from ZeRO ") +
                         (stage3 ? "stage 3" : "stage 1/2") + ", data-parallel size " +
                         std::to_string(meta.world_size) + ")");
    if (!model.has_buffer_names) {
        meta.notes.push_back("no buffer_names in " + model_path + ": buffers are not exported");
    }
    return meta;
}

}  // namespace z2f::checkpoint
