#include "plan/universal_plan.hpp"

#include <algorithm>
#include <unordered_map>

#include "checkpoint/autoep_views.hpp"
#include "checkpoint/parallel_assemble.hpp"
#include "checkpoint/pickled_value.hpp"
#include "common/errors.hpp"
#include "plan/autoep_universal_plan.hpp"
#include "plan/consolidation.hpp"
#include "plan/universal_state_check.hpp"

namespace z2f::plan {
namespace {

std::string step_text(const checkpoint::OptimizerStep& step) {
    return step.form == checkpoint::OptimizerStep::Form::kTensor
               ? "a " + std::string(dtype_display_name(step.dtype)) + " tensor"
               : (step.form == checkpoint::OptimizerStep::Form::kInt ? "an int" : "a float");
}

}  // namespace

// Every group the universal files take a step from has one, and every rank agrees on it (the
// loader asserts that all parameters of a group carry the same step).
void check_universal_steps(const checkpoint::CheckpointMeta& meta) {
    const std::size_t groups = meta.layout == checkpoint::MasterLayout::kPerParam
                                   ? std::size_t{1}  // the stage-3 loaders read state[0] only
                                   : meta.optim.front().master.size();
    for (std::size_t r = 0; r < meta.optim.size(); ++r) {
        const checkpoint::OptimStatesInfo& optim = meta.optim[r];
        for (std::size_t g = 0; g < groups; ++g) {
            const std::optional<checkpoint::OptimizerStep>* step =
                g < optim.group_states.size() ? &optim.group_states[g].step : nullptr;
            if (step == nullptr || !step->has_value()) {
                throw_input_error(meta.files.optim_files[r],
                                  "holds no Adam step for flat group " + std::to_string(g) +
                                      ": a universal checkpoint needs it (DeepSpeed's loader "
                                      "fails at the next optimizer step without it)");
            }
            const checkpoint::OptimizerStep& first = *meta.optim[0].group_states[g].step;
            if (**step != first) {
                throw_input_error(meta.files.optim_files[r],
                                  "Adam step of flat group " + std::to_string(g) + " (" +
                                      step_text(**step) + ") differs from rank 0's (" +
                                      step_text(first) + ")");
            }
        }
    }
}

namespace {

// The number of entries of rank 0's param_groups (check_universal_param_groups makes sure it is
// a list).
std::size_t param_group_count(const checkpoint::CheckpointMeta& meta) {
    const checkpoint::OptimizerGlobalState& state = meta.optim.front().global_state;
    return state.graph.at(*state.param_groups).children.size();
}

}  // namespace

void check_universal_param_groups(const checkpoint::CheckpointMeta& meta) {
    const checkpoint::OptimizerGlobalState& state = meta.optim.front().global_state;
    const std::string& path = meta.files.optim_files.front();
    if (!state.param_groups) {
        throw_input_error(path,
                          "holds no optimizer param_groups (an elastic checkpoint?): a universal "
                          "checkpoint's optimizer_state.pt needs them");
    }
    const checkpoint::PickledNode& groups = state.graph.at(*state.param_groups);
    if (groups.kind != checkpoint::PickledNode::Kind::kList || groups.children.empty()) {
        throw_input_error(path, "optimizer param_groups is not a non-empty list");
    }
    if (meta.layout != checkpoint::MasterLayout::kPerParam &&
        groups.children.size() != meta.optim.front().master.size()) {
        throw_input_error(path,
                          "optimizer param_groups lists " + std::to_string(groups.children.size()) +
                              " groups but the file holds " +
                              std::to_string(meta.optim.front().master.size()) + " flat groups");
    }
}

namespace {

// torch.chunk(parts) of `size` elements: parts of ceil(size / parts), the last ones shorter or
// empty. DeepSpeed's loader cuts a merged parameter back into TP slices this way.
std::vector<std::uint64_t> chunk_sizes(std::uint64_t size, std::uint64_t parts) {
    const std::uint64_t each = parts == 0 ? 0 : (size + parts - 1) / parts;
    std::vector<std::uint64_t> out;
    std::uint64_t left = size;
    for (std::uint64_t p = 0; p < parts; ++p) {
        out.push_back(std::min(each, left));
        left -= out.back();
    }
    return out;
}

std::string sizes_text(const std::vector<std::uint64_t>& sizes) {
    std::string out;
    for (std::uint64_t size : sizes)
        out += (out.empty() ? "" : ", ") + std::to_string(size);
    return "[" + out + "]";
}

// The parameter's local shape on every TP rank of its stage (param_shapes of each rank).
std::vector<std::vector<std::uint64_t>> local_shapes(const checkpoint::ParallelCheckpointMeta& meta,
                                                     std::uint32_t stage, const std::string& name) {
    std::vector<std::vector<std::uint64_t>> out;
    for (std::uint32_t t = 0; t < meta.tp_degree; ++t) {
        const auto& shapes = meta.ranks.at(meta.grid.mp_rank(stage, t)).model.states.param_shapes;
        if (shapes) {
            for (const auto& group : *shapes) {
                for (const checkpoint::NamedShape& shape : group) {
                    if (shape.name == name)
                        out.push_back(shape.shape);
                }
            }
        }
    }
    return out;
}

// The sub_param_shape object of a parameter_with_sub_params parameter, as DeepSpeed's converter
// normalizes it: from universal checkpoint version 0.4 on, and whenever the partition
// dimension's entry lists the sizes, the entry as recorded; before 0.4 a count K of equal
// sub-parameters becomes the tuple of their sizes (the merged size / K), in a tuple shape.
ParamDictEntry sub_param_shape_entry(const checkpoint::ParallelCheckpointMeta& meta,
                                     const TpRuleSet& rules, const checkpoint::SubParamsSpec& spec,
                                     const std::string& name, std::uint32_t stage) {
    if (spec.partition_dim >= spec.shape.size()) {
        throw_internal_error("sub-parameter entry of '" + name + "' without its recorded shape");
    }
    SubParamShapeValue value;
    value.patterns = spec.patterns;
    value.shape = spec.shape;
    value.shape_is_tuple = spec.shape_is_tuple;
    value.partition_dim = spec.partition_dim;
    const checkpoint::SubParamShapeDim& at = value.shape.at(spec.partition_dim);
    if (rules.version() < 0.4 && at.kind == checkpoint::SubParamShapeDim::Kind::kInt) {
        std::uint64_t full = 0;
        for (const auto& local : local_shapes(meta, stage, name))
            full += local.size() > spec.partition_dim ? local[spec.partition_dim] : 0;
        const std::int64_t count = at.values.front();
        if (count < 1 || full % static_cast<std::uint64_t>(count) != 0) {
            throw_input_error(rules.origin(),
                              "parameter '" + name + "' is recorded as " + std::to_string(count) +
                                  " equal sub-parameters, which do not divide its " +
                                  std::to_string(full) + " rows");
        }
        checkpoint::SubParamShapeDim sizes;
        sizes.kind = checkpoint::SubParamShapeDim::Kind::kTuple;
        sizes.values.assign(static_cast<std::size_t>(count),
                            static_cast<std::int64_t>(full / static_cast<std::uint64_t>(count)));
        value.shape[spec.partition_dim] = std::move(sizes);
        value.shape_is_tuple = true;
    }
    ParamDictEntry entry;
    entry.key = "sub_param_shape";
    entry.object = std::move(value);
    return entry;
}

// The keys of a parameter's dict before 'param', from its merge rule, as ds_to_universal.py
// writes them; and the check that DeepSpeed's loader, which cuts the merged tensor back with
// torch.chunk (per sub-parameter first when param_n_sub_params is set), gets every TP rank's
// slice back at the same TP degree.
std::vector<ParamDictEntry> dict_entries(const checkpoint::ParallelCheckpointMeta& meta,
                                         const std::optional<TpRuleSet>& rules,
                                         const std::string& name, std::uint32_t stage) {
    if (!rules) {
        return {{"cat_dim", 0, false}};
    }
    const TpRule rule = rules->rule_for(name);
    std::vector<ParamDictEntry> entries;
    std::uint64_t parts = 0;  // sub-parameters to cut first (0: a plain cat)
    switch (rule.merge) {
        case TpMerge::kReplicated:
        case TpMerge::kAverage:
            break;
        case TpMerge::kCat:
            entries.push_back({"cat_dim", static_cast<std::int64_t>(rule.dim), false});
            break;
        case TpMerge::kSubParams:
            parts = !rule.widths.empty()      ? rule.widths.size()
                    : !rule.sub_sizes.empty() ? rule.sub_sizes.size()
                                              : rule.count;
            if (rule.sub_spec) {
                entries.push_back(sub_param_shape_entry(meta, *rules, *rule.sub_spec, name, stage));
                break;
            }
            entries.push_back({"cat_dim", static_cast<std::int64_t>(rule.dim), false});
            entries.push_back({"param_n_sub_params", static_cast<std::int64_t>(parts), false});
            break;
    }
    if (rule.vocabulary) {
        entries.push_back({"vocab_tensor", 1, true});
    }
    if (meta.tp_degree == 1 || rule.merge == TpMerge::kReplicated ||
        rule.merge == TpMerge::kAverage || rules->autotp()) {
        // One slice, or a copy the loader takes whole (its shape is the local one), or an AutoTP
        // parameter, whose slice the resuming run cuts by its own partition sizes.
        return entries;
    }
    const std::vector<std::vector<std::uint64_t>> locals = local_shapes(meta, stage, name);
    if (locals.size() != meta.tp_degree || locals.front().size() <= rule.dim) {
        throw_internal_error("universal plan: no local shape of '" + name + "' on some TP rank");
    }
    std::vector<std::uint64_t> saved;
    for (const auto& local : locals)
        saved.push_back(local.size() > rule.dim ? local[rule.dim] : 0);
    std::uint64_t full = 0;
    for (std::uint64_t size : saved)
        full += size;
    // What each rank holds, [sub-parameter][TP rank] (one row for a plain cat), against what
    // the loader cuts: the sub-parameters by torch.chunk(parts), then each by chunk(TP).
    std::vector<std::vector<std::uint64_t>> held;
    std::vector<std::vector<std::uint64_t>> cut;
    if (parts == 0 && rule.vocabulary) {
        // The loader pads the stripped rows again to its own rows times TP, then chunks: every
        // rank must have held as many rows as the first.
        held = {saved};
        cut = {std::vector<std::uint64_t>(meta.tp_degree, saved.front())};
    } else if (parts == 0) {
        held = {saved};
        cut = {chunk_sizes(full, meta.tp_degree)};
    } else {
        if (!rule.widths.empty()) {
            held = rule.widths;
        } else if (!rule.sub_sizes.empty()) {
            for (std::uint64_t size : rule.sub_sizes)
                held.emplace_back(meta.tp_degree, size / meta.tp_degree);
        } else {
            for (std::uint64_t k = 0; k < parts; ++k) {
                held.emplace_back();
                for (std::uint64_t size : saved)
                    held.back().push_back(size / parts);
            }
        }
        // A sub_param_shape names each sub-parameter's size, which the loader narrows before
        // it chunks; param_n_sub_params makes it chunk the whole tensor into equal parts.
        std::vector<std::uint64_t> subs;
        if (rule.sub_spec) {
            for (const auto& row : held) {
                std::uint64_t size = 0;
                for (std::uint64_t width : row)
                    size += width;
                subs.push_back(size);
            }
        } else {
            subs = chunk_sizes(full, parts);
        }
        for (std::uint64_t sub : subs)
            cut.push_back(chunk_sizes(sub, meta.tp_degree));
    }
    if (held != cut) {
        throw_unsupported(rules->origin(),
                          "parameter '" + name + "' has TP slices of " + sizes_text(saved) +
                              " along dim " + std::to_string(rule.dim) +
                              ", but DeepSpeed's universal loader cuts the merged tensor with "
                              "torch.chunk" +
                              (parts != 0 ? " per sub-parameter" : std::string()) +
                              " and would give each TP rank another slice: no universal "
                              "checkpoint of it is written");
    }
    return entries;
}

// Where a trainable parameter lives: every (stage, group) whose param_shapes list it, in stage
// order (a tied pipeline weight is listed by each stage that uses it).
using Placements = std::vector<std::pair<std::uint32_t, std::size_t>>;

std::unordered_map<std::string, Placements> placements(
    const checkpoint::ParallelCheckpointMeta& meta) {
    std::unordered_map<std::string, Placements> out;
    for (std::uint32_t s = 0; s < meta.pp_degree; ++s) {
        const auto& shapes = meta.ranks.at(meta.grid.mp_rank(s, 0)).model.states.param_shapes;
        if (!shapes)
            continue;
        for (std::size_t g = 0; g < shapes->size(); ++g) {
            for (const checkpoint::NamedShape& shape : (*shapes)[g])
                out[shape.name].emplace_back(s, g);
        }
    }
    return out;
}

}  // namespace

void check_universal_param_name(const std::string& name, const std::string& origin) {
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
        name.find('\0') != std::string::npos) {
        throw_input_error(origin, "parameter name '" + name +
                                      "' cannot be a folder name of a universal checkpoint "
                                      "(empty, '.', '..', or holding '/' or NUL)");
    }
}

PlanOptions universal_stream_options(Stream stream) {
    PlanOptions options;
    options.dtype = DType::kF32;
    options.exclude_frozen = true;
    options.stream = stream;
    return options;
}

std::unordered_map<std::string, std::size_t> param_group_of(
    const checkpoint::ModelStatesInfo& model) {
    std::unordered_map<std::string, std::size_t> group_of;
    for (std::size_t g = 0; g < model.param_shapes->size(); ++g) {
        for (const checkpoint::NamedShape& shape : (*model.param_shapes)[g])
            group_of.emplace(shape.name, g);
    }
    return group_of;
}

void add_stream_tensor(UniversalPlan& result, UniversalParam& param, std::size_t s,
                       PlannedTensor tensor) {
    if (param.raw)
        tensor.shape = {tensor.numel()};
    else if (tensor.shape.empty())
        tensor.shape = {1};
    tensor.name = param.name + "/" + std::string(stream_name(kUniversalStreams.at(s)));
    param.tensors.at(s) = static_cast<std::uint32_t>(result.plan.tensors.size());
    result.plan.tensors.push_back(std::move(tensor));
}

UniversalPlan plan_universal(const checkpoint::CheckpointMeta& meta) {
    if (meta.world_size == 0 || meta.optim.size() != meta.world_size) {
        throw_internal_error("checkpoint metadata is not assembled");
    }
    if (meta.layout == checkpoint::MasterLayout::kWholeParams) {
        throw_unsupported(meta.files.tag_dir,
                          "is a universal checkpoint already (it holds no ZeRO partitions to "
                          "convert); copy it instead");
    }
    if (meta.model.autoep.zero3_partitioned()) {
        return plan_autoep_universal(checkpoint::autoep_views(meta));
    }
    const bool stage3 = meta.layout == checkpoint::MasterLayout::kPerParam;
    const std::string& model_path = meta.files.model_files.front();
    check_universal_optimizer_state(meta);
    check_universal_steps(meta);
    check_universal_param_groups(meta);

    std::array<ConsolidationPlan, 3> streams;
    for (std::size_t s = 0; s < kUniversalStreams.size(); ++s)
        streams[s] = plan_consolidation(meta, universal_stream_options(kUniversalStreams[s]));
    const std::unordered_map<std::string, std::size_t> group_of = param_group_of(meta.model);

    UniversalPlan result;
    result.plan.inputs = streams[0].plan.inputs;
    result.plan.records = meta.records;
    result.warnings = std::move(streams[0].warnings);
    result.notes = std::move(streams[0].notes);
    for (std::size_t i = 0; i < streams[0].plan.tensors.size(); ++i) {
        const PlannedTensor& master = streams[0].plan.tensors[i];
        if (master.role != TensorRole::kTrainable) {
            continue;
        }
        check_universal_param_name(master.name, model_path);
        UniversalParam param;
        param.name = master.name;
        param.group = group_of.at(master.name);
        if (!stage3) {
            param.step = meta.optim.front().group_states.at(param.group).step;
        } else {
            param.entries.clear();
            param.raw = true;
        }
        for (std::size_t s = 0; s < kUniversalStreams.size(); ++s) {
            PlannedTensor tensor = streams[s].plan.tensors[i];
            if (tensor.name != master.name || tensor.role != TensorRole::kTrainable) {
                throw_internal_error("universal plan: streams list different tensors");
            }
            add_stream_tensor(result, param, s, std::move(tensor));
        }
        result.params.push_back(std::move(param));
    }
    if (result.params.empty()) {
        throw_input_error(model_path,
                          "has no trainable parameters: a universal checkpoint would be empty");
    }
    result.tag = meta.files.tag;
    result.stage3 = stage3;
    // Model files come first in meta.inputs.
    for (std::size_t i = 0; i < meta.files.model_files.size(); ++i) {
        result.copies.push_back(
            {meta.files.model_files[i], static_cast<std::uint32_t>(i), meta.input_sizes.at(i)});
    }
    return result;
}

}  // namespace z2f::plan

namespace z2f::plan {

checkpoint::CheckpointMeta universal_optimizer_source(
    const checkpoint::ParallelCheckpointMeta& meta) {
    if (meta.ranks.front().model.states.autoep.present())
        return checkpoint::autoep_views(meta).whole;
    return checkpoint::data_parallel_meta(meta, meta.ranks.at(meta.grid.mp_rank(0, 0)));
}

UniversalPlan plan_parallel_universal(const checkpoint::ParallelCheckpointMeta& meta,
                                      const ParallelPlanOptions& options) {
    if (meta.ranks.empty()) {
        throw_internal_error("parallel checkpoint metadata is not assembled");
    }
    const std::string& model0 = meta.grid.model_files.front();
    if (meta.ranks.front().model.states.autoep.present()) {
        return plan_autoep_universal(checkpoint::autoep_views(meta));
    }
    if (meta.kind == checkpoint::ParallelKind::kMixtureOfExperts) {
        throw_unsupported(meta.grid.folder.tag_dir,
                          "Mixture-of-Experts checkpoint: DeepSpeed's loader reads no universal "
                          "layout for its (non-AutoEP) experts, and ds_to_universal.py fails on "
                          "them, so none is written; convert it to Hugging Face formats instead");
    }
    if (!meta.zero) {
        throw_unsupported(model0,
                          "a checkpoint without ZeRO optimizer files (ZeRO-0): DeepSpeed's engine "
                          "reads a universal checkpoint only through a ZeRO-1/2/3 or "
                          "BF16_Optimizer optimizer; without one, load_universal skips the "
                          "module's weights and reads no zero/ folder, so the run would resume "
                          "from untrained weights (ds_to_universal.py refuses it too: no "
                          "*_optim_states.pt); convert it to Hugging Face formats, or resume "
                          "from the checkpoint itself");
    }

    // Steps and param groups: every (stage, TP rank) on its own, as a data-parallel checkpoint.
    std::vector<checkpoint::CheckpointMeta> views;
    for (const checkpoint::ModelParallelRank& rank : meta.ranks) {
        views.push_back(checkpoint::data_parallel_meta(meta, rank));
        check_universal_optimizer_state(views.back());
        check_universal_steps(views.back());
    }
    const checkpoint::CheckpointMeta& first = views.at(meta.grid.mp_rank(0, 0));
    check_universal_param_groups(first);
    const std::size_t listed = param_group_count(first);
    for (std::uint32_t mp = 0; mp < views.size(); ++mp) {
        const checkpoint::CheckpointMeta& view = views[mp];
        const std::size_t groups = view.optim.front().master.size();
        if (!meta.grid.is_zero3() && groups > listed) {
            throw_input_error(view.files.optim_files.front(),
                              "holds " + std::to_string(groups) + " flat groups but " +
                                  first.files.optim_files.front() + " lists " +
                                  std::to_string(listed) +
                                  " param_groups, the ones every rank's loader reads from "
                                  "zero/optimizer_state.pt: the later groups would not be loaded");
        }
        const checkpoint::CheckpointMeta& tp0 = views[meta.grid.mp_rank(meta.ranks[mp].stage, 0)];
        // ZeRO-3 cuts each TP rank's slices into sub-groups of its own: compare those both have.
        const std::size_t shared = std::min({groups, view.optim.front().group_states.size(),
                                             tp0.optim.front().group_states.size()});
        for (std::size_t g = 0; g < shared; ++g) {
            if (view.optim.front().group_states[g].step != tp0.optim.front().group_states[g].step) {
                throw_input_error(view.files.optim_files.front(),
                                  "Adam step of flat group " + std::to_string(g) +
                                      " differs from TP rank 0's (" +
                                      tp0.files.optim_files.front() + ")");
            }
        }
    }

    ParallelPlanOptions universal = options;
    universal.base.dtype = DType::kF32;
    universal.base.exclude_frozen = true;
    universal.strip_vocab_padding = true;
    std::array<PiecedPlan, 3> streams;
    for (std::size_t s = 0; s < kUniversalStreams.size(); ++s) {
        universal.base.stream = kUniversalStreams[s];
        streams[s] = plan_parallel_consolidation(meta, universal);
    }
    const std::optional<TpRuleSet> rules = merge_rules(meta, universal);
    const std::unordered_map<std::string, Placements> where = placements(meta);

    UniversalPlan result;
    result.plan.inputs = streams[0].plan.inputs;
    result.plan.records = meta.records;
    result.warnings = std::move(streams[0].warnings);
    result.notes = std::move(streams[0].notes);
    for (std::size_t i = 0; i < streams[0].plan.tensors.size(); ++i) {
        const PlannedTensor& master = streams[0].plan.tensors[i];
        if (master.role != TensorRole::kTrainable) {
            continue;
        }
        check_universal_param_name(master.name, model0);
        auto place = where.find(master.name);
        if (place == where.end()) {
            throw_internal_error("universal plan: '" + master.name + "' is in no param_shapes");
        }
        const auto [stage, group] = place->second.front();
        UniversalParam param;
        param.name = master.name;
        param.group = group;
        param.entries = dict_entries(meta, rules, master.name, stage);
        const checkpoint::CheckpointMeta& home = views.at(meta.grid.mp_rank(stage, 0));
        param.step = home.optim.front().group_states.at(group).step;
        for (const auto& [other_stage, other_group] : place->second) {
            const checkpoint::CheckpointMeta& other = views.at(meta.grid.mp_rank(other_stage, 0));
            if (other.optim.front().group_states.at(other_group).step != param.step) {
                throw_input_error(other.files.optim_files.front(),
                                  "Adam step of tied parameter '" + master.name +
                                      "' differs from its first stage's (" +
                                      home.files.optim_files.front() + ")");
            }
        }
        for (std::size_t s = 0; s < kUniversalStreams.size(); ++s) {
            PlannedTensor tensor = streams[s].plan.tensors.at(i);
            if (tensor.name != master.name || tensor.role != TensorRole::kTrainable ||
                tensor.shape != master.shape) {
                throw_internal_error("universal plan: streams list different tensors");
            }
            if (!flattenable(tensor.pieces) && tensor.replicas.empty()) {
                throw_unsupported(meta.grid.folder.tag_dir,
                                  "parameter '" + master.name +
                                      "': only some of its bytes are averaged over the TP "
                                      "ranks, which the copy engines cannot write");
            }
            add_stream_tensor(result, param, s, std::move(tensor));
        }
        result.params.push_back(std::move(param));
    }
    if (result.params.empty()) {
        throw_input_error(model0,
                          "has no trainable parameters: a universal checkpoint would be empty");
    }
    result.tag = meta.grid.folder.tag;
    // ZeRO-3's loaders read no step.pt (the step is in optimizer_state.pt).
    result.stage3 = meta.grid.is_zero3();
    // The model files, which DeepSpeed's engine reads (one per stage and TP rank, at ZeRO-3 one
    // per TP and DP rank); not the layer files, whose weights it does not load in universal mode.
    for (const checkpoint::ModelParallelRank& rank : meta.ranks) {
        result.copies.push_back({meta.inputs.at(rank.model_input), rank.model_input,
                                 meta.input_sizes.at(rank.model_input)});
        for (std::uint32_t input : rank.zero3_peer_inputs)
            result.copies.push_back({meta.inputs.at(input), input, meta.input_sizes.at(input)});
    }
    return result;
}

}  // namespace z2f::plan
