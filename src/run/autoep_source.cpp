#include "run/autoep_source.hpp"

#include "checkpoint/autoep_views.hpp"
#include "plan/autoep_plan.hpp"

namespace z2f::run {
namespace {

std::string expert_place(std::uint64_t ep_rank, std::uint64_t edp_rank) {
    return ", EP rank " + std::to_string(ep_rank) + ", expert-DP rank " + std::to_string(edp_rank);
}

}  // namespace

TensorSource autoep_zero3_source(const checkpoint::CheckpointMeta& meta, const Options& options) {
    TensorSource source;
    source.checkpoint = meta.files;
    source.zero_stage = meta.zero_stage;
    source.world_size = meta.world_size;
    source.ds_version = meta.ds_version;
    source.notes = meta.notes;
    source.warnings = meta.warnings;
    source.parallel = describe_autoep_grid(meta);
    source.identity = "autoep zero3\n";
    if (options.format != OutputFormat::kUniversal) {
        plan::PiecedPlan pieced = plan::plan_autoep_consolidation(checkpoint::autoep_views(meta),
                                                                  consolidation_options(options));
        source.tensors = std::move(pieced.plan);
        source.warnings.insert(source.warnings.end(), pieced.warnings.begin(),
                               pieced.warnings.end());
        source.notes.insert(source.notes.end(), pieced.notes.begin(), pieced.notes.end());
    } else {
        source.universal = data_parallel_universal(meta, options);
        for (std::size_t i = 0; i < meta.inputs.size(); ++i)
            source.tensors.inputs.push_back(InputFile{meta.inputs[i], meta.input_sizes[i]});
    }
    if (!options.tp_rules.empty())
        source.warnings.push_back(
            "--tp-rules is ignored: this AutoEP checkpoint has no tensor-parallel ranks to merge");
    source.tensors.records = meta.records;
    return source;
}

ConversionPlan::ParallelGrid describe_autoep_grid(const checkpoint::CheckpointMeta& meta) {
    ConversionPlan::ParallelGrid grid;
    grid.kind = "AutoEP (ZeRO-3 partition-native)";
    grid.dp = meta.world_size;
    grid.ep = static_cast<std::uint32_t>(meta.model.autoep.layers.front().ep_size);
    grid.zero = true;
    auto place = [&](std::size_t r) {
        const std::vector<checkpoint::AutoEpLayer>& layers = meta.autoep_by_rank.at(r).layers;
        return layers.empty()
                   ? std::string()
                   : expert_place(
                         static_cast<std::uint64_t>(layers.front().ep_rank),
                         static_cast<std::uint64_t>(layers.front().expert_data_parallel_rank));
    };
    for (std::size_t r = 0; r < meta.files.model_files.size(); ++r) {
        grid.files.push_back(
            {meta.files.model_files[r], "model states, DP rank " + std::to_string(r) + place(r)});
    }
    for (std::size_t r = 0; r < meta.files.optim_files.size(); ++r) {
        grid.files.push_back({meta.files.optim_files[r],
                              "ZeRO-3 partition, DP rank " + std::to_string(r) + place(r)});
    }
    return grid;
}

void describe_autoep_places(const checkpoint::ParallelCheckpointMeta& meta,
                            ConversionPlan::ParallelGrid& grid) {
    const checkpoint::AutoEpInfo& info = meta.ranks.front().model.states.autoep;
    if (!info.present() || meta.grid.optim_files.empty())
        return;
    const auto ep = static_cast<std::uint32_t>(info.layers.front().ep_size);
    const auto world = static_cast<std::uint32_t>(meta.grid.optim_files.front().size());
    grid.kind = "AutoEP (ZeRO-1/2, per-expert files)";
    grid.ep = ep;
    if (ep == 0 || world % ep != 0)
        return;  // refused when planned, naming the counts
    for (ConversionPlan::ParallelGrid::File& file : grid.files) {
        for (std::uint32_t r = 0; r < world; ++r) {
            if (file.path != meta.grid.optim_files.front()[r])
                continue;
            const checkpoint::ExpertPlace place =
                checkpoint::zero12_expert_place(r, world, ep, info.data_before_expert_parallel);
            file.role += expert_place(place.ep_rank, place.edp_rank);
        }
    }
}

}  // namespace z2f::run
