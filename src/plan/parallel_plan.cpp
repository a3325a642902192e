#include "plan/parallel_plan.hpp"

#include <algorithm>
#include <map>
#include <regex>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "checkpoint/autoep_views.hpp"
#include "checkpoint/parallel_assemble.hpp"
#include "common/checked_math.hpp"
#include "common/errors.hpp"
#include "plan/autoep_plan.hpp"
#include "plan/tp_merge.hpp"
#include "plan/zero0_plan.hpp"

namespace z2f::plan {
namespace {

using checkpoint::ModelParallelRank;
using checkpoint::ParallelCheckpointMeta;

// A tensor of one (stage, TP rank) before merging: a PlannedTensor whose extents are its
// stream, and for an alias the owner's name.
struct Local {
    PlannedTensor tensor;
    std::string owner;  // kAlias
};

// A tensor after merging, before indices are assigned.
struct Merged {
    PlannedTensor tensor;  // extents empty
    std::vector<TensorPiece> pieces;
    std::string owner;  // kAlias
    std::uint32_t stage = 0;
    std::string merge;  // PlannedTensor::merge
};

DType floating_output(DType source, const PlanOptions& options) {
    return is_floating(source) ? options.dtype : source;
}

DType output_for(TensorRole role, DType source, const PlanOptions& options) {
    switch (role) {
        case TensorRole::kBuffer:
            return options.cast_all_buffers ? DType::kF32 : floating_output(source, options);
        case TensorRole::kFrozen:
            return options.keep_frozen_dtype ? source : floating_output(source, options);
        default:
            return options.dtype;
    }
}

Local local_from_ref(const std::string& name, const checkpoint::TensorRef& ref, TensorRole role,
                     const PlanOptions& options) {
    Local local;
    local.tensor.name = name;
    local.tensor.shape = ref.shape;
    local.tensor.source_dtype = ref.dtype;
    local.tensor.role = role;
    local.tensor.output_dtype = output_for(role, ref.dtype, options);
    if (ref.length > 0) {
        local.tensor.extents.push_back({ref.file, ref.offset, ref.length});
    }
    return local;
}

std::vector<Local> locals_from_plan(const ConsolidationPlan& plan) {
    std::vector<Local> out;
    for (const PlannedTensor& tensor : plan.plan.tensors) {
        Local local{tensor, {}};
        if (tensor.is_alias()) {
            local.owner = plan.plan.tensors[static_cast<std::size_t>(tensor.alias_of)].name;
            local.tensor.alias_of = -1;
        }
        out.push_back(std::move(local));
    }
    return out;
}

// The layer index of a pipeline name "<L>.<rest>", or -1 (tied_modules.*, anything else).
std::int64_t layer_of(const std::string& name) {
    std::size_t dot = name.find('.');
    if (dot == 0 || dot == std::string::npos) {
        return -1;
    }
    std::int64_t value = 0;
    for (std::size_t i = 0; i < dot; ++i) {
        if (name[i] < '0' || name[i] > '9' || value > (INT64_MAX - 9) / 10) {
            return -1;
        }
        value = value * 10 + (name[i] - '0');
    }
    return value;
}

class ParallelPlanner {
  public:
    ParallelPlanner(const ParallelCheckpointMeta& meta, const ParallelPlanOptions& options)
        : meta_(meta), options_(options), base_(options.base) {}

    PiecedPlan run() {
        for (std::size_t i = 0; i < meta_.inputs.size(); ++i) {
            result_.plan.inputs.push_back({meta_.inputs[i], meta_.input_sizes[i]});
        }
        load_rules();
        std::vector<std::vector<Merged>> stages;
        if (meta_.kind == checkpoint::ParallelKind::kMixtureOfExperts) {
            stages.push_back(moe_stage());
        } else if (meta_.kind == checkpoint::ParallelKind::kPipeline && !meta_.zero) {
            stages.push_back(merge_tp(layer_file_stage_locals(), 0));
        } else {
            for (std::uint32_t s = 0; s < meta_.pp_degree; ++s) {
                std::vector<std::vector<Local>> per_tp;
                for (std::uint32_t t = 0; t < meta_.tp_degree; ++t) {
                    per_tp.push_back(rank_locals(meta_.ranks[meta_.grid.mp_rank(s, t)]));
                }
                stages.push_back(merge_tp(per_tp, s));
            }
        }
        finish(join_stages(std::move(stages)));
        return std::move(result_);
    }

  private:
    const std::string& model_path(std::uint32_t mp) const { return meta_.grid.model_files[mp]; }

    void load_rules() {
        rules_ = merge_rules(meta_, options_);
        if (meta_.tp_degree > 1 && options_.tp_rules &&
            meta_.ranks.front().model.extras.universal_info) {
            result_.notes.push_back(
                "--tp-rules replaces the checkpoint's own "
                "universal_checkpoint_info");
        }
        if (meta_.tp_degree > 1 && !rules_) {
            throw_unsupported(model_path(0),
                              "tensor-parallel checkpoint (TP " + std::to_string(meta_.tp_degree) +
                                  ") without merge rules: no universal_checkpoint_info in the "
                                  "model files (Megatron-DeepSpeed and AutoTP write it), so "
                                  "which parameters are split along which dimension is "
                                  "unknown; give them with --tp-rules FILE "
                                  "(docs/parallel-checkpoints.md §3.3)");
        }
    }

    // One (stage, TP rank): ZeRO partitions, or the module's weights without ZeRO.
    std::vector<Local> rank_locals(const ModelParallelRank& rank) {
        const std::uint32_t mp = meta_.grid.mp_rank(rank.stage, rank.tp_rank);
        if (meta_.zero) {
            checkpoint::CheckpointMeta dp = checkpoint::data_parallel_meta(meta_, rank);
            ConsolidationPlan plan = plan_consolidation(dp, base_);
            absorb(plan, rank.stage == 0 && rank.tp_rank == 0);
            std::vector<Local> locals = locals_from_plan(plan);
            if (meta_.kind == checkpoint::ParallelKind::kPipeline) {
                locals = with_layer_extras(rank, std::move(locals));
            }
            return locals;
        }
        // No ZeRO: the module holds the weights (a TP rank's slices), and a 16-bit run's optimizer
        // wrapper the fp32 masters of its trainable ones.
        const checkpoint::ModelStatesInfo& model = rank.model.states;
        const checkpoint::Zero0Masters& masters = rank.model.extras.zero0_masters;
        std::unordered_set<std::string> buffers(model.buffer_names.begin(),
                                                model.buffer_names.end());
        std::vector<Local> buffer_locals;
        std::vector<Local> params;
        for (const auto& entry : model.module_tensors) {
            if (buffers.count(entry.name) != 0) {
                buffer_locals.push_back(
                    local_from_ref(entry.name, entry.tensor, TensorRole::kBuffer, base_));
            } else if (masters.key.empty()) {
                params.push_back(
                    local_from_ref(entry.name, entry.tensor, TensorRole::kTrainable, base_));
                low_precision_check(entry.tensor.dtype, model_path(mp));
            }
        }
        std::size_t frozen = 0;
        if (!masters.key.empty()) {
            for (const Zero0Param& param : zero0_parameters(model, masters)) {
                frozen += param.role == TensorRole::kFrozen ? 1 : 0;
                if (param.role == TensorRole::kFrozen && base_.exclude_frozen)
                    continue;
                Local local = local_from_ref(param.name, param.source, param.role, base_);
                local.owner = param.owner;
                params.push_back(std::move(local));
            }
        }
        if (mp == 0 && !masters.key.empty()) {
            result_.notes.push_back("no ZeRO: " + std::to_string(masters.masters.size()) +
                                    " trainable parameters from the fp32 masters in " +
                                    model_path(mp) + "'s optimizer['" + masters.key + "'], " +
                                    std::to_string(frozen) + " frozen ones from its 'module'");
        }
        if (mp == 0 && masters.key.empty()) {
            result_.notes.push_back(
                "no ZeRO optimizer files: the weights are the model files' "
                "'module' tensors");
            missing_optimizer_check();
        }
        buffer_locals.insert(buffer_locals.end(), params.begin(), params.end());
        return buffer_locals;
    }

    // Without ZeRO the optimizer state is saved in the model files; when no model file has any,
    // nothing tells a ZeRO-0 run from a ZeRO run whose optimizer files are missing.
    void missing_optimizer_check() {
        for (const ModelParallelRank& rank : meta_.ranks) {
            if (rank.model.extras.has_plain_optimizer_state) {
                return;
            }
        }
        result_.warnings.push_back(
            model_path(0) +
            ": no optimizer files and no optimizer state in the model files: converting the "
            "weights the model files hold; if this was a ZeRO run, its *_optim_states.pt files "
            "(the fp32 master weights) are missing");
    }

    void low_precision_check(DType dtype, const std::string& path) {
        if (is_floating(dtype) && dtype != DType::kF32 && dtype != DType::kF64 && !warned_low_) {
            warned_low_ = true;
            result_.warnings.push_back(
                path +
                ": the run kept no fp32 master weights in its files (no ZeRO optimizer "
                "files): the " +
                std::string(dtype_display_name(dtype)) +
                " weights of the model files are converted instead");
        }
    }

    void absorb(const ConsolidationPlan& plan, bool first) {
        if (!first) {
            return;
        }
        result_.warnings.insert(result_.warnings.end(), plan.warnings.begin(), plan.warnings.end());
        result_.notes.insert(result_.notes.end(), plan.notes.begin(), plan.notes.end());
    }

    // Layers of the pipeline held by `stage`: those named by its trainable parameters, and the
    // layers after them up to the next stage's first (parameterless or frozen-only layers).
    std::uint32_t stage_of_layer(std::uint64_t layer) {
        if (stage_first_layer_.empty()) {
            for (std::uint32_t s = 0; s < meta_.pp_degree; ++s) {
                std::int64_t first = -1;
                const auto& shapes =
                    meta_.ranks[meta_.grid.mp_rank(s, 0)].model.states.param_shapes;
                if (shapes) {
                    for (const auto& group : *shapes) {
                        for (const auto& [name, shape] : group) {
                            std::int64_t l = layer_of(name);
                            if (l >= 0 && (first < 0 || l < first)) {
                                first = l;
                            }
                        }
                    }
                }
                stage_first_layer_.push_back(first);
            }
        }
        std::uint32_t stage = 0;
        for (std::uint32_t s = 0; s < stage_first_layer_.size(); ++s) {
            if (stage_first_layer_[s] >= 0 &&
                static_cast<std::uint64_t>(stage_first_layer_[s]) <= layer) {
                stage = s;
            }
        }
        return stage;
    }

    // A pipeline stage with ZeRO: buffers and frozen parameters come from its layer files
    // ("<L>.<key>"), before the ZeRO-consolidated trainable parameters. A layer file that is
    // the copy of a tied module (all of its keys trainable as tied_modules.<k>.<key>, none as
    // <L>.<key>) is skipped: the tied parameter comes from the ZeRO partitions.
    std::vector<Local> with_layer_extras(const ModelParallelRank& rank, std::vector<Local> zero) {
        const checkpoint::ModelStatesInfo& model = rank.model.states;
        std::unordered_set<std::string> known;
        for (const Local& local : zero) {
            known.insert(local.tensor.name);
        }
        std::unordered_set<std::string> buffers(model.buffer_names.begin(),
                                                model.buffer_names.end());
        std::vector<Local> buffer_locals;
        std::vector<Local> frozen;
        for (const checkpoint::LayerStateDict& layer : meta_.layers) {
            if (layer.tp_rank != rank.tp_rank || stage_of_layer(layer.layer) != rank.stage) {
                continue;
            }
            const std::string prefix = std::to_string(layer.layer) + ".";
            bool own = false;
            bool tied = !layer.state.tensors.empty();
            for (const auto& entry : layer.state.tensors) {
                own = own || known.count(prefix + entry.name) != 0 ||
                      buffers.count(prefix + entry.name) != 0;
                bool as_tied = std::any_of(known.begin(), known.end(), [&](const std::string& n) {
                    return n.starts_with("tied_modules.") && n.ends_with("." + entry.name);
                });
                tied = tied && as_tied;
            }
            if (!own && tied) {
                continue;
            }
            for (const auto& entry : layer.state.tensors) {
                const std::string name = prefix + entry.name;
                if (known.count(name) != 0) {
                    continue;
                }
                if (buffers.count(name) != 0) {
                    buffer_locals.push_back(
                        local_from_ref(name, entry.tensor, TensorRole::kBuffer, base_));
                } else if (!base_.exclude_frozen) {
                    frozen.push_back(
                        local_from_ref(name, entry.tensor, TensorRole::kFrozen, base_));
                }
            }
        }
        buffer_locals.insert(buffer_locals.end(), frozen.begin(), frozen.end());
        buffer_locals.insert(buffer_locals.end(), zero.begin(), zero.end());
        return buffer_locals;
    }

    // A pipeline without ZeRO: every layer file entry, "<L>.<key>", in layer order, one list
    // per TP rank. Buffers are those any stage lists in buffer_names.
    std::vector<std::vector<Local>> layer_file_stage_locals() {
        std::unordered_set<std::string> buffers;
        for (const ModelParallelRank& rank : meta_.ranks) {
            buffers.insert(rank.model.states.buffer_names.begin(),
                           rank.model.states.buffer_names.end());
        }
        std::vector<std::vector<Local>> per_tp(meta_.tp_degree);
        for (const checkpoint::LayerStateDict& layer : meta_.layers) {
            for (const auto& entry : layer.state.tensors) {
                const std::string name = std::to_string(layer.layer) + "." + entry.name;
                TensorRole role =
                    buffers.count(name) != 0 ? TensorRole::kBuffer : TensorRole::kTrainable;
                if (role == TensorRole::kTrainable) {
                    low_precision_check(entry.tensor.dtype, meta_.inputs[layer.input]);
                }
                per_tp.at(layer.tp_rank).push_back(local_from_ref(name, entry.tensor, role, base_));
            }
        }
        missing_optimizer_check();
        result_.notes.push_back("pipeline without ZeRO optimizer files: weights taken from the " +
                                std::to_string(meta_.layers.size()) + " layer files");
        return per_tp;
    }

    PieceCombine replica_combine() const {
        switch (options_.tp_replicated) {
            case ReplicaPolicy::kFirst:
                return PieceCombine::kCopy;
            case ReplicaPolicy::kAverage:
                return PieceCombine::kAverage;
            default:
                return PieceCombine::kCheckEqual;
        }
    }

    // The TP ranks of one stage, name by name.
    std::vector<Merged> merge_tp(const std::vector<std::vector<Local>>& per_tp,
                                 std::uint32_t stage) {
        const std::string& origin = model_path(meta_.grid.mp_rank(stage, 0));
        std::vector<Merged> out;
        const std::vector<Local>& first = per_tp.front();
        for (std::size_t t = 1; t < per_tp.size(); ++t) {
            if (per_tp[t].size() != first.size()) {
                throw_input_error(
                    model_path(meta_.grid.mp_rank(stage, static_cast<std::uint32_t>(t))),
                    "TP rank " + std::to_string(t) + " has " + std::to_string(per_tp[t].size()) +
                        " tensors, TP rank 0 " + std::to_string(first.size()) +
                        ": every TP rank must hold a slice of every parameter");
            }
        }
        for (std::size_t i = 0; i < first.size(); ++i) {
            const PlannedTensor& head = first[i].tensor;
            std::vector<TpSlice> slices;
            for (std::size_t t = 0; t < per_tp.size(); ++t) {
                const Local& local = per_tp[t][i];
                if (local.tensor.name != head.name || local.tensor.role != head.role ||
                    local.tensor.source_dtype != head.source_dtype ||
                    local.owner != first[i].owner) {
                    throw_input_error(
                        model_path(meta_.grid.mp_rank(stage, static_cast<std::uint32_t>(t))),
                        "tensor " + std::to_string(i) + " is '" + local.tensor.name +
                            "' on TP rank " + std::to_string(t) + " but '" + head.name +
                            "' on TP rank 0 (or differs in role or dtype): the TP ranks do not "
                            "describe the same model");
                }
                slices.push_back({local.tensor.shape, local.tensor.extents});
            }
            Merged merged;
            merged.tensor = head;
            merged.tensor.extents.clear();
            merged.owner = first[i].owner;
            merged.stage = stage;
            if (head.role != TensorRole::kAlias) {
                MergedTensor result = merge_one(head, slices, origin, merged.merge);
                merged.tensor.shape = result.shape;
                merged.pieces = std::move(result.pieces);
            }
            out.push_back(std::move(merged));
        }
        return out;
    }

    std::string replicated_text(std::size_t ranks) const {
        static constexpr const char* kPolicy[] = {"checked equal", "TP rank 0's copy", "averaged"};
        return "replicated over " + std::to_string(ranks) + " TP ranks, " +
               kPolicy[static_cast<std::size_t>(options_.tp_replicated)];
    }

    // `merge` receives the rule in words (PlannedTensor::merge).
    MergedTensor merge_one(const PlannedTensor& head, const std::vector<TpSlice>& slices,
                           const std::string& origin, std::string& merge) {
        const std::size_t item = dtype_size(head.source_dtype);
        if (slices.size() == 1) {
            MergedTensor whole{slices.front().shape, {whole_stream_piece(slices.front().stream)}};
            // Without TP only a padded vocabulary changes anything (a pipeline of
            // Megatron-DeepSpeed records its rows too).
            if (options_.strip_vocab_padding && rules_ && head.role == TensorRole::kTrainable &&
                rules_->is_vocabulary(head.name)) {
                merge = "vocabulary stripped to " + std::to_string(rules_->original_vocab_size()) +
                        " rows";
                return strip_vocabulary(std::move(whole), head.name, item, origin);
            }
            return whole;
        }
        const std::string over = " over " + std::to_string(slices.size()) + " TP ranks";
        // Buffers have no rules of their own in Megatron's patterns: replicated unless a rule
        // names them.
        if (head.role == TensorRole::kBuffer && !rules_->matches_explicitly(head.name)) {
            merge = replicated_text(slices.size());
            return merge_replicated(slices, replica_combine(), head.name, origin);
        }
        TpRule rule = rules_->rule_for(head.name);
        MergedTensor merged;
        switch (rule.merge) {
            case TpMerge::kReplicated:
                merge = replicated_text(slices.size());
                merged = merge_replicated(slices, replica_combine(), head.name, origin);
                break;
            case TpMerge::kAverage:
                merge = "averaged" + over;
                merged = merge_replicated(slices, PieceCombine::kAverage, head.name, origin);
                break;
            case TpMerge::kCat:
                merge = "cat dim " + std::to_string(rule.dim) + over;
                merged = merge_cat(slices, rule.dim, item, head.name, origin);
                break;
            case TpMerge::kSubParams: {
                std::vector<std::vector<std::uint64_t>> widths = rule.widths;
                if (widths.empty() && !rule.sub_sizes.empty()) {
                    for (std::uint64_t size : rule.sub_sizes) {
                        if (size % slices.size() != 0) {
                            throw_unsupported(origin, "sub-parameter of size " +
                                                          std::to_string(size) + " of '" +
                                                          head.name +
                                                          "' is not divisible by the TP degree "
                                                          "and no shard widths are recorded");
                        }
                        widths.emplace_back(slices.size(), size / slices.size());
                    }
                } else if (widths.empty()) {
                    widths = even_sub_param_widths(slices, rule.dim, rule.count, head.name, origin);
                }
                merge = std::to_string(widths.size()) + " sub-parameters along dim " +
                        std::to_string(rule.dim) + over;
                merged = merge_sub_params(slices, rule.dim, widths, item, head.name, origin);
                break;
            }
        }
        if (rule.vocabulary) {
            merge += options_.strip_vocab_padding
                         ? ", vocabulary stripped to " +
                               std::to_string(rules_->original_vocab_size()) + " rows"
                         : ", padded vocabulary kept";
        }
        if (rule.vocabulary && options_.strip_vocab_padding) {
            merged = strip_vocabulary(std::move(merged), head.name, item, origin);
        }
        return merged;
    }

    MergedTensor strip_vocabulary(MergedTensor merged, const std::string& name, std::size_t item,
                                  const std::string& origin) const {
        if (rules_->original_vocab_size() < 0) {
            throw_input_error(rules_->origin(),
                              "vocabulary stripping: no original_vocab_size recorded for "
                              "vocabulary parameter '" +
                                  name + "'");
        }
        return truncate_dim0(std::move(merged),
                             static_cast<std::uint64_t>(rules_->original_vocab_size()), item, name,
                             origin);
    }

    // Stage lists joined in order; a name seen at an earlier stage (a tied layer) is checked
    // equal to that copy and not written again.
    std::vector<Merged> join_stages(std::vector<std::vector<Merged>> stages) {
        std::vector<Merged> out;
        std::unordered_map<std::string, std::size_t> seen;
        for (auto& stage : stages) {
            for (Merged& merged : stage) {
                if (meta_.pp_degree > 1) {
                    merged.merge = "stage " + std::to_string(merged.stage) +
                                   (merged.merge.empty() ? "" : ", " + merged.merge);
                }
                auto it = seen.find(merged.tensor.name);
                if (it == seen.end()) {
                    seen.emplace(merged.tensor.name, out.size());
                    out.push_back(std::move(merged));
                    continue;
                }
                Merged& kept = out[it->second];
                if (kept.tensor.shape != merged.tensor.shape ||
                    kept.tensor.source_dtype != merged.tensor.source_dtype ||
                    kept.tensor.role != merged.tensor.role ||
                    kept.pieces.size() != merged.pieces.size()) {
                    throw_input_error(model_path(meta_.grid.mp_rank(merged.stage, 0)),
                                      "'" + merged.tensor.name + "' appears in stages " +
                                          std::to_string(kept.stage) + " and " +
                                          std::to_string(merged.stage) +
                                          " with different shapes, dtypes or roles");
                }
                for (std::size_t p = 0; p < kept.pieces.size(); ++p) {
                    TensorPiece& into = kept.pieces[p];
                    const TensorPiece& copy = merged.pieces[p];
                    if (into.offset != copy.offset || into.rows != copy.rows ||
                        into.row_bytes != copy.row_bytes || into.stride != copy.stride) {
                        throw_internal_error("tied copies of '" + merged.tensor.name +
                                             "' merged differently");
                    }
                    if (into.combine == PieceCombine::kCopy) {
                        into.combine = PieceCombine::kCheckEqual;
                    }
                    // The copy is compared from the same stream position as the kept rows.
                    for (const auto& source : copy.sources) {
                        if (copy.source_offset != into.source_offset ||
                            copy.source_stride != into.source_stride) {
                            throw_internal_error("tied copies of '" + merged.tensor.name +
                                                 "' read differently");
                        }
                        into.sources.push_back(source);
                    }
                }
                kept.merge +=
                    ", tied copy in stage " + std::to_string(merged.stage) + " checked equal";
                result_.notes.push_back("'" + merged.tensor.name + "' is tied across stages " +
                                        std::to_string(kept.stage) + " and " +
                                        std::to_string(merged.stage) +
                                        ": written once, the copies checked equal");
            }
        }
        return out;
    }

    // --- MoE -----------------------------------------------------------------------------

    // One MoE layer, as its expert files show it.
    struct MoeLayer {
        std::string prefix;  // "<module path>.deepspeed_moe.experts.deepspeed_experts."
        std::uint64_t num_experts = 0;
        // global expert -> its tensors (name, ref) in file order
        std::map<std::uint64_t, const checkpoint::StateDictInfo*> experts;
    };

    static constexpr std::string_view kExpertsInfix = ".deepspeed_moe.experts.deepspeed_experts.";

    // Splits "<prefix><id>.<rest>" (DeepSpeed's `.*deepspeed_moe.experts.deepspeed_experts.
    // ([0-9]+).*`, greedy: the last occurrence) into prefix, id and rest.
    static bool split_expert_name(const std::string& name, std::string& prefix, std::uint64_t& id,
                                  std::string& rest) {
        std::size_t at = name.rfind(kExpertsInfix);
        if (at == std::string::npos) {
            return false;
        }
        std::size_t begin = at + kExpertsInfix.size();
        std::size_t end = begin;
        id = 0;
        while (end < name.size() && name[end] >= '0' && name[end] <= '9' && end - begin < 18) {
            id = id * 10 + static_cast<std::uint64_t>(name[end] - '0');
            ++end;
        }
        if (end == begin) {
            return false;
        }
        prefix = name.substr(0, begin);
        rest = name.substr(end);
        return true;
    }

    std::vector<Merged> moe_stage() {
        const ModelParallelRank& rank0 = meta_.ranks.front();
        const std::string& model0 = model_path(0);
        const auto& num_experts = rank0.model.extras.num_experts;
        // MoE layers from the expert files.
        std::map<std::int64_t, MoeLayer> layers;
        for (const checkpoint::ExpertStateDict& expert : meta_.experts) {
            MoeLayer& layer = layers[expert.moe_layer];
            layer.experts[expert.expert] = &expert.state;
            for (const auto& entry : expert.state.tensors) {
                std::string prefix;
                std::string rest;
                std::uint64_t id = 0;
                if (!split_expert_name(entry.name, prefix, id, rest) || id != expert.expert) {
                    throw_input_error(meta_.inputs[expert.input],
                                      "expert file entry '" + entry.name +
                                          "' is not named <module>" + std::string(kExpertsInfix) +
                                          std::to_string(expert.expert) + ".<param>");
                }
                if (!layer.prefix.empty() && layer.prefix != prefix) {
                    throw_input_error(meta_.inputs[expert.input],
                                      "expert files of one MoE layer name two modules, '" +
                                          layer.prefix + "' and '" + prefix + "'");
                }
                layer.prefix = prefix;
            }
        }
        std::size_t index = 0;
        for (auto& [id, layer] : layers) {
            std::size_t which = id >= 0 ? static_cast<std::size_t>(id) : index;
            if (which >= num_experts.size()) {
                throw_input_error(model0, "num_experts lists " +
                                              std::to_string(num_experts.size()) +
                                              " MoE layers but expert files of layer " +
                                              std::to_string(which) + " exist");
            }
            layer.num_experts = static_cast<std::uint64_t>(num_experts[which]);
            if (layer.experts.size() != layer.num_experts) {
                throw_input_error(meta_.grid.folder.tag_dir,
                                  "MoE layer " + std::to_string(which) + " has " +
                                      std::to_string(layer.num_experts) +
                                      " experts (num_experts) but " +
                                      std::to_string(layer.experts.size()) + " expert files");
            }
            ++index;
        }

        std::vector<Merged> dense;
        std::vector<std::vector<Merged>> experts_by_layer(layers.size());
        if (!meta_.zero) {
            dense = merge_tp({rank_locals(rank0)}, 0);
            std::size_t l = 0;
            for (const auto& [id, layer] : layers) {
                for (const auto& [e, state] : layer.experts) {
                    for (const auto& entry : state->tensors) {
                        Local local =
                            local_from_ref(entry.name, entry.tensor, TensorRole::kTrainable, base_);
                        low_precision_check(entry.tensor.dtype, model0);
                        experts_by_layer[l].push_back(single(local));
                    }
                }
                ++l;
            }
        } else {
            moe_zero(layers, dense, experts_by_layer);
        }
        std::size_t described = 0;
        for (const auto& [id, layer] : layers) {
            for (Merged& expert : experts_by_layer[described]) {
                std::string prefix;
                std::string rest;
                std::uint64_t e = 0;
                if (split_expert_name(expert.tensor.name, prefix, e, rest)) {
                    expert.merge = "expert " + std::to_string(e) + " of " +
                                   std::to_string(layer.num_experts) + ", MoE layer " +
                                   std::to_string(id >= 0 ? id : 0);
                }
            }
            ++described;
        }
        // Each MoE layer's experts follow the last dense tensor of its module's deepspeed_moe
        // (its gate); a layer whose module has none goes last.
        std::vector<Merged> out;
        std::vector<bool> placed(layers.size(), false);
        std::vector<std::string> moe_prefixes;
        for (const auto& [id, layer] : layers) {
            moe_prefixes.push_back(
                layer.prefix.substr(0, layer.prefix.size() - kExpertsInfix.size()) +
                ".deepspeed_moe.");
        }
        for (std::size_t i = 0; i < dense.size(); ++i) {
            out.push_back(std::move(dense[i]));
            for (std::size_t l = 0; l < moe_prefixes.size(); ++l) {
                if (placed[l] || !out.back().tensor.name.starts_with(moe_prefixes[l])) {
                    continue;
                }
                bool more =
                    i + 1 < dense.size() && dense[i + 1].tensor.name.starts_with(moe_prefixes[l]);
                if (!more) {
                    for (Merged& expert : experts_by_layer[l])
                        out.push_back(std::move(expert));
                    placed[l] = true;
                }
            }
        }
        for (std::size_t l = 0; l < placed.size(); ++l) {
            if (!placed[l]) {
                for (Merged& expert : experts_by_layer[l])
                    out.push_back(std::move(expert));
            }
        }
        return out;
    }

    static Merged single(const Local& local) {
        Merged merged;
        merged.tensor = local.tensor;
        merged.tensor.extents.clear();
        merged.owner = local.owner;
        if (local.tensor.role != TensorRole::kAlias) {
            merged.pieces.push_back(whole_stream_piece(local.tensor.extents));
        }
        return merged;
    }

    // Names and shapes of group g of one expert-parallel rank, from param_shapes when the model
    // file has them, else from the ranks' param_slice_mappings (in rank order, each parameter
    // once) with shapes from `shape_of`.
    template <typename ShapeOf>
    std::vector<checkpoint::NamedShape> group_names(std::size_t g,
                                                    const std::vector<std::uint32_t>& dp_ranks,
                                                    ShapeOf&& shape_of) {
        const ModelParallelRank& rank0 = meta_.ranks.front();
        const auto& shapes = rank0.model.states.param_shapes;
        if (shapes) {
            if (g >= shapes->size()) {
                throw_input_error(model_path(0), "param_shapes has no group " + std::to_string(g));
            }
            return (*shapes)[g];
        }
        std::vector<checkpoint::NamedShape> out;
        for (std::uint32_t r : dp_ranks) {
            const auto& groups = rank0.optim.empty() ? std::vector<checkpoint::OptimGroupExtras>{}
                                                     : meta_.ranks.front().optim[r].extras.groups;
            if (g >= groups.size()) {
                throw_input_error(meta_.grid.optim_files[0][r],
                                  "neither param_shapes in the model file nor param_slice_mappings "
                                  "for group " +
                                      std::to_string(g) +
                                      " here: the parameters of the group are unknown");
            }
            for (const checkpoint::SliceMapping& slice : groups[g].slices) {
                if (!out.empty() && out.back().name == slice.name) {
                    continue;
                }
                out.push_back({slice.name, shape_of(slice.name, meta_.grid.optim_files[0][r])});
            }
        }
        return out;
    }

    void moe_zero(const std::map<std::int64_t, MoeLayer>& layers, std::vector<Merged>& dense,
                  std::vector<std::vector<Merged>>& experts_by_layer) {
        const ModelParallelRank& rank0 = meta_.ranks.front();
        const std::uint32_t world = meta_.dp_degree;
        const checkpoint::OptimStatesInfo& first = rank0.optim.front().states;
        const std::string& optim0 = meta_.grid.optim_files[0][0];
        for (std::size_t r = 1; r < rank0.optim.size(); ++r) {
            if (rank0.optim[r].states.partition_count != first.partition_count ||
                rank0.optim[r].states.master.size() != first.master.size()) {
                throw_input_error(meta_.grid.optim_files[0][r],
                                  "partition_count or group count differs from " + optim0);
            }
        }
        if (first.partition_count.size() != first.master.size()) {
            throw_input_error(
                optim0, "partition_count lists " + std::to_string(first.partition_count.size()) +
                            " groups, the file holds " + std::to_string(first.master.size()));
        }
        std::unordered_map<std::string, const checkpoint::TensorRef*> module_refs;
        for (const auto& entry : rank0.model.states.module_tensors) {
            module_refs.emplace(entry.name, &entry.tensor);
        }
        // Global expert name -> tensor of its expert file, and MoE layer index of a prefix.
        std::unordered_map<std::string, const checkpoint::TensorRef*> expert_refs;
        std::map<std::string, std::size_t> layer_of_prefix;
        std::size_t l = 0;
        for (const auto& [id, layer] : layers) {
            layer_of_prefix[layer.prefix] = l++;
            for (const auto& [e, state] : layer.experts) {
                for (const auto& entry : state->tensors) {
                    expert_refs.emplace(entry.name, &entry.tensor);
                }
            }
        }

        // Dense groups: partitioned over every rank.
        checkpoint::CheckpointMeta dense_meta = moe_group_meta({}, rank0);
        std::vector<std::uint32_t> all_ranks;
        for (std::uint32_t r = 0; r < world; ++r)
            all_ranks.push_back(r);
        std::vector<std::vector<checkpoint::NamedShape>> dense_shapes;
        for (std::size_t g = 0; g < first.master.size(); ++g) {
            const std::int64_t count = first.partition_count[g];
            if (count == static_cast<std::int64_t>(world)) {
                dense_shapes.push_back(group_names(
                    g, all_ranks, [&](const std::string& name, const std::string& where) {
                        auto it = module_refs.find(name);
                        if (it == module_refs.end()) {
                            throw_input_error(where, "dense parameter '" + name +
                                                         "' has no tensor in the model file's "
                                                         "module to take its shape from");
                        }
                        return it->second->shape;
                    }));
                for (std::uint32_t r = 0; r < world; ++r) {
                    dense_meta.optim[r].master.push_back(rank0.optim[r].states.master[g]);
                }
            } else if (count < 1 || world % static_cast<std::uint32_t>(count) != 0) {
                throw_input_error(optim0, "group " + std::to_string(g) + " is partitioned over " +
                                              std::to_string(count) + " of " +
                                              std::to_string(world) +
                                              " ranks, which is no expert-data-parallel group");
            }
        }
        dense_meta.model.param_shapes = dense_shapes;
        ConsolidationPlan dense_plan = plan_consolidation(dense_meta, base_);
        absorb(dense_plan, true);
        dense = merge_tp({locals_from_plan(dense_plan)}, 0);

        // Expert groups: expert-parallel rank e holds its local experts' flat group, partitioned
        // over the ranks R with R % ep == e (expert-data-parallel rank R / ep).
        std::unordered_set<std::string> planned_experts;
        for (std::size_t g = 0; g < first.master.size(); ++g) {
            const auto count = static_cast<std::uint32_t>(first.partition_count[g]);
            if (count == world) {
                continue;
            }
            const std::uint32_t ep = world / count;
            for (std::uint32_t e = 0; e < ep; ++e) {
                std::vector<std::uint32_t> ranks;
                for (std::uint32_t d = 0; d < count; ++d)
                    ranks.push_back(e + d * ep);
                std::vector<std::string> global_names;
                auto globalise = [&](const std::string& local, const std::string& where) {
                    std::string prefix;
                    std::string rest;
                    std::uint64_t id = 0;
                    if (!split_expert_name(local, prefix, id, rest)) {
                        throw_input_error(where, "expert group " + std::to_string(g) + " holds '" +
                                                     local + "', which names no expert");
                    }
                    auto layer = layer_of_prefix.find(prefix);
                    if (layer == layer_of_prefix.end()) {
                        throw_input_error(where, "expert parameter '" + local +
                                                     "' belongs to no MoE layer of the expert "
                                                     "files");
                    }
                    const MoeLayer& moe =
                        std::next(layers.begin(), static_cast<std::ptrdiff_t>(layer->second))
                            ->second;
                    if (moe.num_experts % ep != 0 || id >= moe.num_experts / ep) {
                        throw_input_error(where, "expert parameter '" + local + "': local expert " +
                                                     std::to_string(id) + " does not exist with " +
                                                     std::to_string(moe.num_experts) +
                                                     " experts over " + std::to_string(ep) +
                                                     " expert-parallel ranks");
                    }
                    return prefix + std::to_string(e * (moe.num_experts / ep) + id) + rest;
                };
                std::vector<checkpoint::NamedShape> shapes =
                    group_names(g, ranks, [&](const std::string& local, const std::string& where) {
                        std::string global = globalise(local, where);
                        auto it = expert_refs.find(global);
                        if (it == expert_refs.end()) {
                            throw_input_error(
                                where, "expert parameter '" + global + "' is in no expert file");
                        }
                        return it->second->shape;
                    });
                checkpoint::CheckpointMeta expert_meta = moe_group_meta(ranks, rank0);
                for (std::uint32_t d = 0; d < count; ++d) {
                    expert_meta.optim[d].master.push_back(rank0.optim[ranks[d]].states.master[g]);
                }
                expert_meta.model.param_shapes =
                    std::vector<std::vector<checkpoint::NamedShape>>{shapes};
                ConsolidationPlan plan = plan_consolidation(expert_meta, base_);
                for (const PlannedTensor& tensor : plan.plan.tensors) {
                    Local local{tensor, {}};
                    local.tensor.name = globalise(tensor.name, optim0);
                    std::string prefix;
                    std::string rest;
                    std::uint64_t id = 0;
                    split_expert_name(local.tensor.name, prefix, id, rest);
                    expert_tensors_[local.tensor.name] = single(local);
                    planned_experts.insert(local.tensor.name);
                }
            }
        }
        // Every expert tensor in global expert order, in its file's key order: trainable ones
        // from the ZeRO partitions, the rest (frozen parameters, buffers) from the file.
        std::unordered_set<std::string> buffers(rank0.model.states.buffer_names.begin(),
                                                rank0.model.states.buffer_names.end());
        l = 0;
        for (const auto& [id, layer] : layers) {
            for (const auto& [e, state] : layer.experts) {
                for (const auto& entry : state->tensors) {
                    auto it = expert_tensors_.find(entry.name);
                    if (it != expert_tensors_.end()) {
                        if (it->second.tensor.shape != entry.tensor.shape) {
                            throw_input_error(optim0, "expert parameter '" + entry.name +
                                                          "' has another shape in its expert "
                                                          "file");
                        }
                        experts_by_layer[l].push_back(std::move(it->second));
                    } else {
                        TensorRole role = buffers.count(entry.name) != 0 ? TensorRole::kBuffer
                                                                         : TensorRole::kFrozen;
                        if (role == TensorRole::kFrozen && base_.exclude_frozen) {
                            continue;
                        }
                        experts_by_layer[l].push_back(
                            single(local_from_ref(entry.name, entry.tensor, role, base_)));
                    }
                }
            }
            ++l;
        }
    }

    // A data-parallel view of some of the MoE ranks' groups (masters filled by the caller):
    // `ranks` empty means every rank, with the model file's module, buffers and ties (dense);
    // otherwise the expert-data-parallel ranks of one expert group, with nothing else.
    checkpoint::CheckpointMeta moe_group_meta(const std::vector<std::uint32_t>& ranks,
                                              const ModelParallelRank& rank0) const {
        checkpoint::CheckpointMeta sub;
        sub.files.checkpoint_dir = meta_.grid.folder.checkpoint_dir;
        sub.files.tag = meta_.grid.folder.tag;
        sub.files.tag_dir = meta_.grid.folder.tag_dir;
        sub.files.model_files = {meta_.grid.model_files[0]};
        const checkpoint::OptimStatesInfo& first = rank0.optim.front().states;
        sub.layout = first.layout;
        sub.zero_stage = first.layout == checkpoint::MasterLayout::kPaddedGroups
                             ? 1
                             : static_cast<int>(first.zero_stage);
        std::vector<std::uint32_t> members = ranks;
        if (members.empty()) {
            for (std::uint32_t r = 0; r < meta_.dp_degree; ++r)
                members.push_back(r);
            sub.model = rank0.model.states;
            sub.frozen_fragments_by_rank.push_back(sub.model.frozen_param_fragments);
            if (!sub.model.shared_params) {
                sub.model.shared_params.emplace();  // no inference from expert-less modules
            }
        } else {
            sub.model.has_buffer_names = true;
            sub.model.shared_params.emplace();
            sub.frozen_fragments_by_rank.emplace_back();
        }
        sub.world_size = static_cast<std::uint32_t>(members.size());
        for (std::uint32_t r : members) {
            sub.files.optim_files.push_back(meta_.grid.optim_files[0][r]);
            checkpoint::OptimStatesInfo optim = rank0.optim[r].states;
            optim.master.clear();
            optim.partition_count = {static_cast<std::int64_t>(members.size())};
            sub.optim.push_back(std::move(optim));
        }
        sub.inputs = meta_.inputs;
        sub.input_sizes = meta_.input_sizes;
        return sub;
    }

    // --- final -----------------------------------------------------------------------------

    void finish(std::vector<Merged> merged) {
        std::unordered_map<std::string, std::size_t> index;
        for (Merged& entry : merged) {
            auto [it, inserted] = index.emplace(entry.tensor.name, result_.plan.tensors.size());
            if (!inserted) {
                throw_input_error(meta_.grid.folder.tag_dir,
                                  "tensor name '" + entry.tensor.name + "' appears twice");
            }
            PlannedTensor tensor = std::move(entry.tensor);
            if (tensor.role == TensorRole::kAlias) {
                auto owner = index.find(entry.owner);
                if (owner == index.end()) {
                    index.erase(tensor.name);
                    continue;
                }
                tensor.alias_of = static_cast<std::int64_t>(owner->second);
                tensor.shape = result_.plan.tensors[owner->second].shape;
            } else {
                const std::uint64_t bytes = tensor.source_bytes();
                check_pieces(entry.pieces, bytes, tensor.name);
                if (flattenable(entry.pieces)) {
                    if (flat_is_compact(entry.pieces))
                        tensor.extents = flatten_pieces(entry.pieces, bytes, tensor.name);
                    // else: flattened range by range where read (PlannedTensor::pieces)
                } else {
                    tensor.replicas = averaged_replicas(entry.pieces, bytes);
                }
                tensor.pieces = std::move(entry.pieces);
            }
            tensor.merge = std::move(entry.merge);
            result_.plan.tensors.push_back(std::move(tensor));
        }
    }

    const ParallelCheckpointMeta& meta_;
    const ParallelPlanOptions& options_;
    const PlanOptions& base_;
    std::optional<TpRuleSet> rules_;
    PiecedPlan result_;
    std::vector<std::int64_t> stage_first_layer_;
    std::unordered_map<std::string, Merged> expert_tensors_;
    bool warned_low_ = false;
};

}  // namespace

std::optional<TpRuleSet> merge_rules(const ParallelCheckpointMeta& meta,
                                     const ParallelPlanOptions& options) {
    const auto& info = meta.ranks.front().model.extras.universal_info;
    const std::string& origin = meta.grid.model_files.front();
    if (meta.tp_degree > 1) {
        if (options.tp_rules)
            return options.tp_rules;
        if (info)
            return TpRuleSet::from_universal_info(*info, origin);
        return std::nullopt;
    }
    // Without TP the rules decide nothing but vocabulary stripping; they are not even parsed
    // unless it is asked for.
    if (options.strip_vocab_padding && info)
        return TpRuleSet::from_universal_info(*info, origin);
    return std::nullopt;
}

PiecedPlan plan_parallel_consolidation(const ParallelCheckpointMeta& meta,
                                       const ParallelPlanOptions& options) {
    if (meta.ranks.empty()) {
        throw_internal_error("parallel checkpoint metadata is not assembled");
    }
    // AutoEP's experts are fused weights over expert groups, not per-expert tensors.
    if (meta.ranks.front().model.states.autoep.present())
        return plan_autoep_consolidation(checkpoint::autoep_views(meta), options.base);
    return ParallelPlanner(meta, options).run();
}

}  // namespace z2f::plan
