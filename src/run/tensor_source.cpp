#include "run/tensor_source.hpp"

#include "checkpoint/sequence_parallel.hpp"
#include "common/crc32.hpp"
#include "common/errors.hpp"
#include "plan/parallel_plan.hpp"
#include "plan/tp_rules.hpp"
#include "run/autoep_source.hpp"
#include "run/run_plan.hpp"
#include "run/sequence_parallel_grid.hpp"

namespace z2f::run {
namespace {

std::string place(const checkpoint::ParallelCheckpointMeta& meta, std::uint32_t stage,
                  std::uint32_t tp_rank) {
    std::string text;
    if (meta.pp_degree > 1)
        text += ", stage " + std::to_string(stage);
    if (meta.tp_degree > 1)
        text += ", TP rank " + std::to_string(tp_rank);
    return text;
}

const char* kind_name(const checkpoint::ParallelCheckpointMeta& meta) {
    switch (meta.kind) {
        case checkpoint::ParallelKind::kPipeline:
            return "pipeline";
        case checkpoint::ParallelKind::kMixtureOfExperts:
            return "mixture-of-experts";
        case checkpoint::ParallelKind::kTensorParallel:
            break;
    }
    return meta.tp_degree > 1 ? "tensor-parallel" : "single model file";
}

plan::ReplicaPolicy replica_policy(TpReplicated choice) {
    switch (choice) {
        case TpReplicated::kFirst:
            return plan::ReplicaPolicy::kFirst;
        case TpReplicated::kAverage:
            return plan::ReplicaPolicy::kAverage;
        case TpReplicated::kCheck:
            break;
    }
    return plan::ReplicaPolicy::kCheck;
}

// Checked again here although assembly refuses these layouts: the data-parallel universal plan
// reads one model file as the whole model.
void refuse_parallel_sources(const checkpoint::CheckpointMeta& meta) {
    const checkpoint::ModelStatesInfo& model = meta.model;
    const std::string& path =
        meta.files.model_files.empty() ? meta.files.tag_dir : meta.files.model_files.front();
    if (model.module_is_none || checkpoint::records_model_parallelism(model)) {
        throw_unsupported(path,
                          "a tensor- or pipeline-parallel checkpoint whose tag folder holds the "
                          "files of model-parallel rank 00 only: the other ranks' files are "
                          "missing");
    }
}

}  // namespace

UniversalSource data_parallel_universal(const checkpoint::CheckpointMeta& meta,
                                        const Options& options) {
    validate_options(options);
    refuse_parallel_sources(meta);
    return UniversalSource{plan::plan_universal(meta), meta};
}

plan::PlanOptions consolidation_options(const Options& options) {
    plan::PlanOptions plan_options;
    plan_options.dtype = options.dtype;
    plan_options.cast_all_buffers = options.cast_all_buffers;
    plan_options.keep_frozen_dtype = options.keep_frozen_dtype;
    plan_options.exclude_frozen = options.exclude_frozen;
    plan_options.stage1_frozen = options.stage1_frozen;
    return plan_options;
}

TensorSource tensor_source(const CheckpointMetadata& metadata, const Options& options) {
    if (const auto* parallel = std::get_if<checkpoint::ParallelCheckpointMeta>(&metadata.meta))
        return parallel_source(*parallel, options, metadata.tp_rules_text);
    return data_parallel_source(std::get<checkpoint::CheckpointMeta>(metadata.meta), options);
}

TensorSource data_parallel_source(const checkpoint::CheckpointMeta& meta, const Options& options) {
    // A universal checkpoint of one holds its experts whole already.
    if (meta.model.autoep.zero3_partitioned() && meta.layout == checkpoint::MasterLayout::kPerParam)
        return autoep_zero3_source(meta, options);
    TensorSource source;
    source.checkpoint = meta.files;
    source.zero_stage = meta.zero_stage;
    source.world_size = meta.world_size;
    source.ds_version = meta.ds_version;
    source.notes = meta.notes;
    // A universal output is planned from the metadata itself (three streams per parameter), not
    // from the one-stream consolidation, which it would not use.
    if (options.format == OutputFormat::kUniversal) {
        source.universal = data_parallel_universal(meta, options);
        // The run identity still names every input file and its size.
        for (std::size_t i = 0; i < meta.inputs.size(); ++i)
            source.tensors.inputs.push_back(InputFile{meta.inputs[i], meta.input_sizes[i]});
    } else {
        plan::ConsolidationPlan consolidation =
            plan::plan_consolidation(meta, consolidation_options(options));
        source.tensors = std::move(consolidation.plan);
        source.warnings = meta.warnings;
        source.warnings.insert(source.warnings.end(), consolidation.warnings.begin(),
                               consolidation.warnings.end());
        source.notes.insert(source.notes.end(), consolidation.notes.begin(),
                            consolidation.notes.end());
    }
    if (!options.tp_rules.empty())
        source.warnings.push_back(
            "--tp-rules is ignored: this data-parallel checkpoint has no "
            "tensor-parallel ranks to merge");
    source.tensors.records = meta.records;
    if (meta.sequence_parallel > 1)
        source.parallel = describe_sequence_parallel_grid(meta);
    return source;
}

TensorSource parallel_source(const checkpoint::ParallelCheckpointMeta& meta, const Options& options,
                             const std::optional<std::string>& tp_rules_text) {
    plan::ParallelPlanOptions plan_options;
    plan_options.base = consolidation_options(options);
    plan_options.tp_replicated = replica_policy(options.tp_replicated);
    plan_options.strip_vocab_padding = options.strip_vocab_padding;
    if (tp_rules_text)
        plan_options.tp_rules = plan::TpRuleSet::from_json(*tp_rules_text, options.tp_rules);

    TensorSource source;
    source.checkpoint.checkpoint_dir = meta.grid.folder.checkpoint_dir;
    source.checkpoint.tag = meta.grid.folder.tag;
    source.checkpoint.tag_dir = meta.grid.folder.tag_dir;
    source.checkpoint.model_files = meta.grid.model_files;
    source.checkpoint.optim_prefix = meta.grid.optim_prefix;
    for (const auto& by_dp : meta.grid.optim_files)
        source.checkpoint.optim_files.insert(source.checkpoint.optim_files.end(), by_dp.begin(),
                                             by_dp.end());
    if (meta.zero)
        source.zero_stage = static_cast<int>(meta.ranks.front().optim.front().states.zero_stage);
    source.world_size = meta.tp_degree * meta.pp_degree * meta.dp_degree;
    source.ds_version = meta.ds_version;
    source.notes = meta.notes;
    source.parallel = describe_grid(meta);
    describe_autoep_places(meta, *source.parallel);

    if (options.format == OutputFormat::kUniversal) {
        // Planned from the metadata itself, three streams per parameter (universal_run_plan);
        // the run identity still names every input file and its size.
        validate_options(options);
        source.universal = UniversalSource{plan::plan_parallel_universal(meta, plan_options),
                                           plan::universal_optimizer_source(meta)};
        for (std::size_t i = 0; i < meta.inputs.size(); ++i)
            source.tensors.inputs.push_back(InputFile{meta.inputs[i], meta.input_sizes[i]});
    } else {
        plan::PiecedPlan pieced = plan::plan_parallel_consolidation(meta, plan_options);
        source.tensors = std::move(pieced.plan);
        source.warnings = std::move(pieced.warnings);
        source.notes.insert(source.notes.end(), pieced.notes.begin(), pieced.notes.end());
    }
    source.tensors.records = meta.records;
    if (tp_rules_text && meta.tp_degree == 1)
        source.warnings.push_back(
            "--tp-rules is ignored: this checkpoint has no tensor-parallel "
            "ranks to merge");
    source.identity = "parallel tp_replicated=" + std::string(enum_name(options.tp_replicated)) +
                      " strip_vocab_padding=" + std::to_string(options.strip_vocab_padding) +
                      " tp_rules=" +
                      (tp_rules_text ? std::to_string(crc32_of(std::as_bytes(std::span(
                                           tp_rules_text->data(), tp_rules_text->size()))))
                                     : std::string("checkpoint")) +
                      "\n";
    return source;
}

ConversionPlan::ParallelGrid describe_grid(const checkpoint::ParallelCheckpointMeta& meta) {
    ConversionPlan::ParallelGrid grid;
    grid.kind = kind_name(meta);
    grid.tp = meta.tp_degree;
    grid.pp = meta.pp_degree;
    grid.dp = meta.dp_degree;
    grid.zero = meta.zero;
    if (!meta.grid.expert_optim_files.empty())
        grid.ep = static_cast<std::uint32_t>(meta.grid.expert_optim_files.front().size());
    for (const checkpoint::ModelParallelRank& rank : meta.ranks) {
        const std::string dp = meta.grid.is_zero3() ? ", DP rank 0" : "";
        grid.files.push_back({meta.inputs.at(rank.model_input),
                              "model states" + place(meta, rank.stage, rank.tp_rank) + dp});
        for (std::size_t d = 0; d < rank.zero3_peer_inputs.size(); ++d) {
            grid.files.push_back({meta.inputs.at(rank.zero3_peer_inputs[d]),
                                  "model states" + place(meta, rank.stage, rank.tp_rank) +
                                      ", DP rank " + std::to_string(d + 1)});
        }
    }
    for (const checkpoint::ModelParallelRank& rank : meta.ranks) {
        for (std::size_t d = 0; d < rank.optim_inputs.size(); ++d) {
            grid.files.push_back(
                {meta.inputs.at(rank.optim_inputs[d]),
                 std::string(meta.grid.is_zero3() ? "ZeRO-3 partition" : "ZeRO partition") +
                     place(meta, rank.stage, rank.tp_rank) + ", DP rank " + std::to_string(d)});
        }
    }
    for (const checkpoint::LayerStateDict& layer : meta.layers) {
        grid.files.push_back({meta.inputs.at(layer.input),
                              "pipeline layer " + std::to_string(layer.layer) +
                                  (meta.tp_degree > 1 ? ", TP rank " + std::to_string(layer.tp_rank)
                                                      : std::string())});
    }
    for (const checkpoint::ExpertStateDict& expert : meta.experts) {
        grid.files.push_back({meta.inputs.at(expert.input),
                              "expert " + std::to_string(expert.expert) + ", MoE layer " +
                                  std::to_string(expert.moe_layer >= 0 ? expert.moe_layer : 0)});
    }
    for (const auto& by_rank : meta.grid.expert_optim_files) {
        for (std::size_t r = 0; r < by_rank.size(); ++r) {
            grid.files.push_back(
                {by_rank[r], "expert optimizer, EP rank " + std::to_string(r) + " (not read)"});
        }
    }
    return grid;
}

}  // namespace z2f::run
