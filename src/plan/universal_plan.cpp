#include "plan/universal_plan.hpp"

#include <unordered_map>

#include "checkpoint/pickled_value.hpp"
#include "common/errors.hpp"
#include "plan/consolidation.hpp"

namespace z2f::plan {
namespace {

constexpr std::array<Stream, 3> kStreams = {Stream::kMaster, Stream::kExpAvg, Stream::kExpAvgSq};

std::string step_text(const checkpoint::OptimizerStep& step) {
    return step.form == checkpoint::OptimizerStep::Form::kTensor
               ? "a " + std::string(dtype_display_name(step.dtype)) + " tensor"
               : (step.form == checkpoint::OptimizerStep::Form::kInt ? "an int" : "a float");
}

// Every group the universal files take a step from has one, and every rank agrees on it (the
// loader asserts that all parameters of a group carry the same step).
void check_steps(const checkpoint::CheckpointMeta& meta) {
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

void check_param_groups(const checkpoint::CheckpointMeta& meta) {
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

}  // namespace

void check_universal_param_name(const std::string& name, const std::string& origin) {
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
        name.find('\0') != std::string::npos) {
        throw_input_error(origin, "parameter name '" + name +
                                      "' cannot be a folder name of a universal checkpoint "
                                      "(empty, '.', '..', or holding '/' or NUL)");
    }
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
    const bool stage3 = meta.layout == checkpoint::MasterLayout::kPerParam;
    const std::string& model_path = meta.files.model_files.front();
    check_steps(meta);
    check_param_groups(meta);

    std::array<ConsolidationPlan, 3> streams;
    for (std::size_t s = 0; s < kStreams.size(); ++s) {
        PlanOptions options;
        options.dtype = DType::kF32;
        options.exclude_frozen = true;
        options.stream = kStreams[s];
        streams[s] = plan_consolidation(meta, options);
    }

    // param_shapes group of every parameter.
    std::unordered_map<std::string, std::size_t> group_of;
    for (std::size_t g = 0; g < meta.model.param_shapes->size(); ++g) {
        for (const auto& shape : (*meta.model.param_shapes)[g]) {
            group_of.emplace(shape.name, g);
        }
    }

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
        for (std::size_t s = 0; s < kStreams.size(); ++s) {
            PlannedTensor tensor = streams[s].plan.tensors[i];
            if (tensor.name != master.name || tensor.role != TensorRole::kTrainable) {
                throw_internal_error("universal plan: streams list different tensors");
            }
            if (stage3) {
                tensor.shape = {tensor.numel()};
            } else if (tensor.shape.empty()) {
                tensor.shape = {1};
            }
            tensor.name = master.name + "/" + std::string(stream_name(kStreams[s]));
            param.tensors[s] = static_cast<std::uint32_t>(result.plan.tensors.size());
            result.plan.tensors.push_back(std::move(tensor));
        }
        result.params.push_back(std::move(param));
    }
    if (result.params.empty()) {
        throw_input_error(model_path,
                          "has no trainable parameters: a universal checkpoint would be empty");
    }
    return result;
}

}  // namespace z2f::plan
