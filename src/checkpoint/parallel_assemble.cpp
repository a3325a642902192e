#include "checkpoint/parallel_assemble.hpp"

#include "checkpoint/assemble.hpp"
#include "checkpoint/sequence_parallel.hpp"
#include "common/errors.hpp"

namespace z2f::checkpoint {
namespace {

std::string degrees_text(const FileGrid& grid) {
    return "TP " + std::to_string(grid.tp_degree) + " x PP " + std::to_string(grid.pp_degree);
}

void check_recorded_degrees(const FileGrid& grid, const std::string& path,
                            const ModelStatesInfo& model) {
    // A sequence-parallel run records its SP degree as tp_degree: its weights are not split.
    const std::int64_t tp_degree =
        recorded_sequence_parallel_degree(model) > 1 ? 1 : model.tp_degree;
    if (tp_degree > 0 && static_cast<std::uint64_t>(tp_degree) != grid.tp_degree) {
        throw_input_error(path, "checkpoint_parallel_dimensions records tp_degree " +
                                    std::to_string(model.tp_degree) + " but the file names give " +
                                    degrees_text(grid) + ": files are missing or from another run");
    }
    if (model.pp_degree > 0 && static_cast<std::uint64_t>(model.pp_degree) != grid.pp_degree) {
        throw_input_error(path, "checkpoint_parallel_dimensions records pp_degree " +
                                    std::to_string(model.pp_degree) + " but the file names give " +
                                    degrees_text(grid) + ": files are missing or from another run");
    }
    if (model.mp_world_size > 0 &&
        static_cast<std::uint64_t>(model.mp_world_size) != grid.mp_size()) {
        throw_input_error(path, "mp_world_size is " + std::to_string(model.mp_world_size) +
                                    " but the tag folder holds the model files of " +
                                    std::to_string(grid.mp_size()) + " model-parallel ranks (" +
                                    (grid.is_zero3() ? "zero_pp_rank_D_mp_rank_MM" : "mp_rank_MM") +
                                    "_model_states.pt)");
    }
}

// AutoEP at ZeRO-1/2 of one model-parallel rank, with its expert files, is read
// (autoep_views.hpp); every other combination is refused here, naming what is missing.
void check_autoep_layout(const FileGrid& grid, const std::string& path, const AutoEpInfo& autoep) {
    if (!autoep.present()) {
        return;
    }
    if (grid.mp_size() > 1 || grid.is_pipeline()) {
        throw_unsupported(path, "AutoEP expert layers (ds_autoep_layers) with " +
                                    degrees_text(grid) +
                                    ": how the fused experts are folded over tensor-parallel "
                                    "ranks or stages is not read here (DeepSpeed's converter "
                                    "refuses it too)");
    }
    if (grid.dp_size() == 0) {
        throw_unsupported(path,
                          "AutoEP expert layers without ZeRO optimizer files (ZeRO-0): the "
                          "expert weights of a run without ZeRO partitions are not read here");
    }
    if (autoep.zero3_partitioned() || grid.is_zero3()) {
        throw_input_error(path,
                          "records AutoEP layers in the ZeRO-3 partition-native format next to "
                          "files of another layout: files of two runs?");
    }
    if (!grid.has_experts()) {
        throw_input_error(
            path,
            "records AutoEP expert layers (per_expert_files) but the tag folder holds "
            "no layer_<L>_expert_<E>_mp_rank_00_model_states.pt file: the checkpoint "
            "is incomplete");
    }
}

}  // namespace

bool is_parallel_checkpoint(const FileGrid& grid) {
    return grid.mp_size() > 1 || grid.is_pipeline() || grid.has_experts();
}

std::vector<InputFileSpec> parallel_inputs(const FileGrid& grid) {
    std::vector<InputFileSpec> inputs;
    for (const std::string& path : grid.model_files) {
        inputs.push_back({path, InputKind::kGridModel});
    }
    for (const auto& by_dp : grid.optim_files) {
        for (const std::string& path : by_dp) {
            inputs.push_back({path, InputKind::kGridOptim});
        }
    }
    for (const LayerFile& layer : grid.layer_files) {
        inputs.push_back({layer.path, InputKind::kStateDict});
    }
    for (const ExpertFile& expert : grid.expert_files) {
        inputs.push_back({expert.path, InputKind::kStateDict});
    }
    for (const auto& by_dp : grid.zero3_model_files) {
        for (std::size_t d = 1; d < by_dp.size(); ++d) {
            inputs.push_back({by_dp[d], InputKind::kGridModel});
        }
    }
    return inputs;
}

ParallelCheckpointMeta assemble_parallel_meta(const FileGrid& grid, std::vector<FileMeta> metas) {
    std::vector<InputFileSpec> inputs = parallel_inputs(grid);
    if (metas.size() != inputs.size()) {
        throw_internal_error("metadata of " + std::to_string(metas.size()) + " files for " +
                             std::to_string(inputs.size()) + " inputs");
    }
    if (grid.is_zero3() && grid.optim_files.empty()) {
        throw_input_error(grid.folder.tag_dir,
                          "ZeRO-3 model files but no *_optim_states.pt files: the fp32 master "
                          "partitions are missing");
    }
    ParallelCheckpointMeta meta;
    meta.grid = grid;
    meta.tp_degree = grid.tp_degree;
    meta.pp_degree = grid.pp_degree;
    meta.dp_degree = std::max<std::uint32_t>(grid.dp_size(), 1);
    meta.zero = grid.dp_size() > 0;
    meta.kind = grid.has_experts()   ? ParallelKind::kMixtureOfExperts
                : grid.is_pipeline() ? ParallelKind::kPipeline
                                     : ParallelKind::kTensorParallel;
    std::uint32_t next = 0;
    auto take = [&](auto tag) -> decltype(auto) {
        using T = decltype(tag);
        FileMeta& file = metas[next];
        meta.inputs.push_back(inputs[next].path);
        meta.input_sizes.push_back(file.size);
        meta.records.insert(meta.records.end(), file.records.begin(), file.records.end());
        T* info = std::get_if<T>(&file.info);
        if (info == nullptr) {
            throw_internal_error("metadata kind does not match input " + inputs[next].path);
        }
        ++next;
        return std::move(*info);
    };

    for (std::uint32_t mp = 0; mp < grid.mp_size(); ++mp) {
        ModelParallelRank rank;
        rank.stage = mp / grid.tp_degree;
        rank.tp_rank = mp % grid.tp_degree;
        rank.model_input = next;
        rank.model = take(ModelFile{});
        meta.ranks.push_back(std::move(rank));
    }
    for (std::uint32_t mp = 0; mp < grid.optim_files.size(); ++mp) {
        for (std::size_t d = 0; d < grid.optim_files[mp].size(); ++d) {
            meta.ranks[mp].optim_inputs.push_back(next);
            meta.ranks[mp].optim.push_back(take(OptimFile{}));
        }
    }
    for (const LayerFile& layer : grid.layer_files) {
        std::uint32_t input = next;
        meta.layers.push_back({layer.layer, layer.tp_rank, input, take(StateDictInfo{})});
    }
    for (const ExpertFile& expert : grid.expert_files) {
        std::uint32_t input = next;
        meta.experts.push_back({expert.moe_layer, expert.expert, input, take(StateDictInfo{})});
    }
    for (std::uint32_t mp = 0; mp < grid.zero3_model_files.size(); ++mp) {
        for (std::size_t d = 1; d < grid.zero3_model_files[mp].size(); ++d) {
            meta.ranks[mp].zero3_peer_inputs.push_back(next);
            meta.ranks[mp].zero3_peers.push_back(take(ModelFile{}));
        }
    }

    // The layout itself is refused before any file's content is judged: the names show it.
    // (AutoEP's own refusals name it: check_autoep_layout below.)
    if (meta.kind == ParallelKind::kMixtureOfExperts &&
        (grid.mp_size() > 1 || grid.is_pipeline()) &&
        !meta.ranks.front().model.states.autoep.present()) {
        throw_unsupported(grid.folder.tag_dir,
                          "MoE expert files together with " +
                              std::string(grid.is_pipeline() ? "pipeline" : "tensor") +
                              " parallelism (" + degrees_text(grid) +
                              "): how experts are split over TP ranks or stages is not "
                              "recorded in a form this tool reads "
                              "(docs/parallel-checkpoints.md §7)");
    }
    const ModelParallelRank& first = meta.ranks.front();
    const std::string& first_path = grid.model_files.front();
    meta.ds_version = first.model.states.ds_version;
    for (std::uint32_t mp = 0; mp < meta.ranks.size(); ++mp) {
        const ModelParallelRank& rank = meta.ranks[mp];
        const std::string& path = grid.model_files[mp];
        check_recorded_degrees(grid, path, rank.model.states);
        for (std::size_t d = 0; d < rank.zero3_peers.size(); ++d) {
            check_recorded_degrees(grid, grid.zero3_model_files[mp][d + 1],
                                   rank.zero3_peers[d].states);
        }
        check_autoep_layout(grid, path, rank.model.states.autoep);
        if (meta.kind == ParallelKind::kPipeline) {
            if (!rank.model.states.module_is_none && !rank.model.states.module_tensors.empty()) {
                meta.notes.push_back(path +
                                     ": a pipeline stage with a non-empty 'module'; the layer "
                                     "files are used");
            }
        } else if (rank.model.states.module_is_none) {
            throw_input_error(path,
                              "'module' is None (a pipeline stage) but the tag folder has no "
                              "layer_LL-model_states.pt files: the pipeline's weights are "
                              "missing");
        }
        if (rank.model.extras.universal_info != first.model.extras.universal_info) {
            throw_input_error(path, "universal_checkpoint_info differs from " + first_path +
                                        "'s: every rank must carry the same merge rules");
        }
        if (!rank.optim.empty()) {
            const OptimStatesInfo& ref = meta.ranks.front().optim.front().states;
            for (std::size_t d = 0; d < rank.optim.size(); ++d) {
                const OptimStatesInfo& other = rank.optim[d].states;
                if (other.layout != ref.layout || other.zero_stage != ref.zero_stage) {
                    throw_input_error(grid.optim_files[mp][d],
                                      "ZeRO stage or layout differs from " +
                                          grid.optim_files[0][0] +
                                          "'s: optimizer files from different runs?");
                }
            }
        }
    }

    if (meta.kind == ParallelKind::kMixtureOfExperts) {
        if (first.model.extras.num_experts.empty()) {
            throw_input_error(first_path,
                              "expert files but no num_experts: the expert count of each MoE "
                              "layer is needed to map local experts to global ones");
        }
    }
    if (meta.zero) {
        const OptimStatesInfo& ref = meta.ranks.front().optim.front().states;
        if ((ref.layout == MasterLayout::kPerParam) != grid.is_zero3()) {
            throw_input_error(grid.optim_files[0][0],
                              grid.is_zero3()
                                  ? "holds no ZeRO-3 partitions, but the model files are ZeRO-3's "
                                    "zero_pp_rank_D_mp_rank_MM_model_states.pt: files of two runs?"
                                  : "holds ZeRO-3 partitions, but the model files are "
                                    "mp_rank_MM_model_states.pt (ZeRO-0/1/2): ZeRO-3 writes one "
                                    "zero_pp_rank_D_mp_rank_MM_model_states.pt per rank");
        }
    }
    return meta;
}

ParallelCheckpointMeta read_parallel_checkpoint_meta(const FileGrid& grid) {
    std::vector<InputFileSpec> inputs = parallel_inputs(grid);
    std::vector<FileMeta> metas;
    metas.reserve(inputs.size());
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        metas.push_back(read_file_meta(inputs[i], static_cast<std::uint32_t>(i)));
    }
    return assemble_parallel_meta(grid, std::move(metas));
}

CheckpointMeta data_parallel_meta(const ParallelCheckpointMeta& meta,
                                  const ModelParallelRank& rank) {
    const std::uint32_t mp = meta.grid.mp_rank(rank.stage, rank.tp_rank);
    const bool zero3 = meta.grid.is_zero3();
    CheckpointFiles files;
    files.checkpoint_dir = meta.grid.folder.checkpoint_dir;
    files.tag = meta.grid.folder.tag;
    files.tag_dir = meta.grid.folder.tag_dir;
    files.model_files = zero3 ? meta.grid.zero3_model_files.at(mp)
                              : std::vector<std::string>{meta.grid.model_files[mp]};
    files.per_rank_model_files = zero3;
    files.optim_files = meta.grid.optim_files.at(mp);
    files.optim_prefix = meta.grid.optim_prefix;
    files.has_offloaded_tensors = meta.grid.has_offloaded_tensors;

    // The model file describes one slice of the model: its own degrees are checked above, and
    // as a data-parallel checkpoint it is one model-parallel rank of one.
    ModelStatesInfo model = rank.model.states;
    model.module_is_none = false;
    model.tp_degree = -1;
    model.pp_degree = -1;
    model.mp_world_size = -1;
    std::vector<FileMeta> metas;
    auto records_of = [&](std::uint32_t input) {
        std::vector<InputRecord> records;
        for (const InputRecord& record : meta.records) {
            if (record.file == input)
                records.push_back(record);
        }
        return records;
    };
    metas.push_back({meta.input_sizes[rank.model_input], ModelFile{std::move(model), {}},
                     records_of(rank.model_input)});
    for (std::size_t d = 0; d < rank.zero3_peers.size(); ++d) {
        const std::uint32_t input = rank.zero3_peer_inputs[d];
        metas.push_back({meta.input_sizes[input], ModelFile{rank.zero3_peers[d].states, {}},
                         records_of(input)});
    }
    for (std::size_t d = 0; d < rank.optim.size(); ++d) {
        metas.push_back({meta.input_sizes[rank.optim_inputs[d]],
                         OptimFile{rank.optim[d].states, {}}, records_of(rank.optim_inputs[d])});
    }
    return assemble_checkpoint_meta(files, std::move(metas));
}

}  // namespace z2f::checkpoint
