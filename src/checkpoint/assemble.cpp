#include "checkpoint/assemble.hpp"

#include <algorithm>

#include "checkpoint/sequence_parallel.hpp"
#include "common/errors.hpp"

namespace z2f::checkpoint {
namespace {

std::string join_ints(const std::vector<std::int64_t>& values) {
    std::string out;
    for (std::int64_t v : values) {
        out += (out.empty() ? "" : ", ") + std::to_string(v);
    }
    return out;
}

}  // namespace

std::vector<InputFileSpec> checkpoint_inputs(const CheckpointFiles& files) {
    std::vector<InputFileSpec> inputs;
    for (std::size_t i = 0; i < files.model_files.size(); ++i) {
        inputs.push_back(
            {files.model_files[i], i == 0 ? InputKind::kFirstModel : InputKind::kOtherModel});
    }
    for (const auto& path : files.optim_files) {
        inputs.push_back({path, InputKind::kOptim});
    }
    return inputs;
}

CheckpointMeta assemble_checkpoint_meta(const CheckpointFiles& files, std::vector<FileMeta> metas) {
    std::vector<InputFileSpec> inputs = checkpoint_inputs(files);
    if (metas.size() != inputs.size()) {
        throw_internal_error("metadata of " + std::to_string(metas.size()) + " files for " +
                             std::to_string(inputs.size()) + " inputs");
    }
    CheckpointMeta meta;
    meta.files = files;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        meta.inputs.push_back(inputs[i].path);
        meta.input_sizes.push_back(metas[i].size);
        meta.records.insert(meta.records.end(), metas[i].records.begin(), metas[i].records.end());
        bool is_model = inputs[i].kind != InputKind::kOptim;
        if (is_model != std::holds_alternative<ModelFile>(metas[i].info) ||
            (!is_model && !std::holds_alternative<OptimFile>(metas[i].info))) {
            throw_internal_error("metadata kind does not match input " + inputs[i].path);
        }
        if (inputs[i].kind == InputKind::kFirstModel) {
            meta.model = std::get<ModelFile>(std::move(metas[i].info)).states;
            meta.frozen_fragments_by_rank.push_back(meta.model.frozen_param_fragments);
            meta.autoep_by_rank.push_back(meta.model.autoep);
        } else if (inputs[i].kind == InputKind::kOtherModel) {
            ModelStatesInfo other = std::get<ModelFile>(std::move(metas[i].info)).states;
            meta.frozen_fragments_by_rank.push_back(std::move(other.frozen_param_fragments));
            meta.autoep_by_rank.push_back(std::move(other.autoep));
        } else {
            meta.optim.push_back(std::get<OptimFile>(std::move(metas[i].info)).states);
        }
    }

    const std::string& model_path = files.model_files.front();
    const std::string& optim0_path = files.optim_files.front();
    const ModelStatesInfo& model = meta.model;
    const OptimStatesInfo& first = meta.optim.front();

    // Layouts we refuse, each with what to do instead.
    if (model.module_is_none) {
        throw_unsupported(model_path,
                          "'module' is None: a pipeline-parallel (PipelineEngine) "
                          "checkpoint keeps its layers in layer_* files, and the tag folder "
                          "has none: the pipeline's weights are missing");
    }
    meta.sequence_parallel = resolve_sequence_parallel(files, model);
    if (meta.sequence_parallel == 1 && records_model_parallelism(model)) {
        throw_unsupported(model_path, "tensor/pipeline-parallel checkpoint (tp=" +
                                          std::to_string(model.tp_degree) +
                                          ", pp=" + std::to_string(model.pp_degree) +
                                          ", mp_world_size=" + std::to_string(model.mp_world_size) +
                                          ") but the tag folder holds the files of model-parallel "
                                          "rank 00 only: the other ranks' files are missing");
    }
    // AutoEP at ZeRO-1/2 always writes its layer_<L>_expert_<E> files, which route a folder to
    // the parallel reader; at ZeRO-3 (partition-native) the expert groups are checked and
    // planned by autoep_grid.hpp.
    if (model.autoep.present() && !model.autoep.zero3_partitioned()) {
        throw_input_error(model_path,
                          "records AutoEP expert layers (ds_autoep_layers, per_expert_files) but "
                          "the tag folder holds no layer_<L>_expert_<E>_mp_rank_MM_model_states.pt "
                          "file: the checkpoint is incomplete");
    }
    if (model.autoep.zero3_partitioned() && first.layout != MasterLayout::kPerParam) {
        throw_input_error(model_path,
                          "records AutoEP layers in the ZeRO-3 partition-native format but " +
                              optim0_path + " holds no ZeRO-3 partitions: files of two runs?");
    }

    // One stage and layout everywhere.
    for (std::size_t r = 1; r < meta.optim.size(); ++r) {
        const OptimStatesInfo& other = meta.optim[r];
        if (other.layout != first.layout || other.zero_stage != first.zero_stage ||
            other.partition_count != first.partition_count ||
            other.master.size() != first.master.size()) {
            throw_input_error(files.optim_files[r],
                              "does not match " + optim0_path +
                                  " (ZeRO stage, partition_count or number of flat groups "
                                  "differ): optimizer files from different runs?");
        }
    }
    meta.layout = first.layout;
    meta.zero_stage =
        first.layout == MasterLayout::kPaddedGroups ? 1 : static_cast<int>(first.zero_stage);
    meta.ds_version = !model.ds_version.empty() ? model.ds_version : first.ds_version;

    // World size: zero_to_fp32 takes partition_count (the max of the per-group list).
    std::int64_t world =
        *std::max_element(first.partition_count.begin(), first.partition_count.end());
    for (std::size_t g = 0; g < first.partition_count.size(); ++g) {
        if (first.partition_count[g] != world) {
            throw_unsupported(
                optim0_path, "param group " + std::to_string(g) + " is partitioned over " +
                                 std::to_string(first.partition_count[g]) + " ranks, others over " +
                                 std::to_string(world) + " (partition_count = [" +
                                 join_ints(first.partition_count) +
                                 "]): Mixture-of-Experts expert groups are not supported; use "
                                 "DeepSpeed's ds_to_universal.py");
        }
    }
    if (static_cast<std::uint64_t>(world) != files.optim_files.size()) {
        throw_input_error(files.tag_dir,
                          "expected " + std::to_string(world) +
                              " *_optim_states.pt files (partition_count in " + optim0_path +
                              ") but found " + std::to_string(files.optim_files.size()) +
                              ": an overwrite of an old checkpoint, or a checkpoint that was not "
                              "saved by every rank");
    }
    meta.world_size = static_cast<std::uint32_t>(world);
    for (const ZeroPartitionGroup& group : first.partition_groups) {
        if (group.count > 0 && group.count != world && !model.autoep.zero3_partitioned()) {
            throw_unsupported(
                optim0_path, "sub-groups partitioned over " + std::to_string(group.count) + " of " +
                                 std::to_string(world) +
                                 " ranks, but the model file records no AutoEP layers "
                                 "(ds_autoep_layers) that say which ranks share them");
        }
    }

    if (meta.layout == MasterLayout::kPerParam) {
        if (!files.per_rank_model_files) {
            throw_input_error(files.tag_dir,
                              "ZeRO-3 optimizer files but a single "
                              "mp_rank_00_model_states.pt: ZeRO-3 writes one "
                              "zero_pp_rank_R_mp_rank_00_model_states.pt per rank");
        }
        if (files.model_files.size() != meta.world_size) {
            throw_input_error(files.tag_dir,
                              "expected " + std::to_string(meta.world_size) +
                                  " ZeRO-3 model-states files (one per rank), found " +
                                  std::to_string(files.model_files.size()));
        }
    } else if (files.per_rank_model_files) {
        throw_input_error(files.tag_dir,
                          "ZeRO-1/2 optimizer files but per-rank ZeRO-3 model-states "
                          "files: files from different runs?");
    }

    if (!model.param_shapes) {
        if (first.param_shapes) {
            meta.model.param_shapes = first.param_shapes;  // DeepSpeed < 0.6 kept them here
            meta.notes.push_back("param_shapes read from the optimizer files (DeepSpeed < 0.6)");
        } else {
            throw_unsupported(model_path,
                              "param_shapes is missing or None: nothing was partitioned by ZeRO "
                              "(a ZeRO-0 or non-ZeRO run), so the model-states file already "
                              "holds the full weights");
        }
    }
    if (!model.has_buffer_names) {
        meta.notes.push_back("no buffer_names in " + model_path +
                             " (DeepSpeed < 0.4.2): buffers are not exported");
    }
    if (model.dp_world_size > 0 && model.dp_world_size != world) {
        meta.notes.push_back("dp_world_size is " + std::to_string(model.dp_world_size) +
                             " but the optimizer is partitioned over " + std::to_string(world) +
                             " ranks (MiCS or hpZ sharding)");
    }
    if (meta.sequence_parallel > 1) {
        meta.notes.push_back(
            sequence_parallel_note(meta.sequence_parallel, meta.world_size, model_path));
    }
    if (meta.layout == MasterLayout::kPaddedGroups) {
        meta.notes.push_back(
            "BF16_Optimizer checkpoint (no zero_stage): converted as ZeRO-1 with "
            "padded partitions");
    }
    return meta;
}

CheckpointMeta read_checkpoint_meta(const CheckpointFiles& files) {
    std::vector<InputFileSpec> inputs = checkpoint_inputs(files);
    std::vector<FileMeta> metas;
    metas.reserve(inputs.size());
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        metas.push_back(read_file_meta(inputs[i], static_cast<std::uint32_t>(i)));
    }
    return assemble_checkpoint_meta(files, std::move(metas));
}

}  // namespace z2f::checkpoint
