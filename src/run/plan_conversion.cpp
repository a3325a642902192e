// z2f::plan_conversion (zero2fp32/plan.hpp): the plan of a conversion in one process, without
// MPI. The same discovery (either reader, checkpoint/routing.hpp), metadata and RunPlan as
// z2f::convert, read serially.
#include "checkpoint/assemble.hpp"
#include "checkpoint/parallel_assemble.hpp"
#include "checkpoint/routing.hpp"
#include "run/run_plan.hpp"
#include "zero2fp32/plan.hpp"
#include "zero2fp32/version.hpp"

namespace z2f {

ConversionPlan plan_conversion(const std::filesystem::path& checkpoint, const Options& options) {
    run::validate_options(options);
    checkpoint::DiscoveredCheckpoint found = checkpoint::discover_any_checkpoint(
        checkpoint.string(), options.tag, checkpoint::DiscoveryOptions{options.from_universal});
    run::CheckpointMetadata metadata;
    if (const auto* grid = std::get_if<checkpoint::FileGrid>(&found.files)) {
        if (!options.tp_rules.empty())
            metadata.tp_rules_text = checkpoint::read_tp_rules_file(options.tp_rules);
        metadata.meta = checkpoint::read_parallel_checkpoint_meta(*grid);
    } else {
        metadata.meta =
            checkpoint::read_checkpoint_meta(std::get<checkpoint::CheckpointFiles>(found.files));
    }
    run::RunSettings settings;
    settings.options = options;
    settings.ranks = 1;
    settings.writer_version = kVersion;
    return run::conversion_plan_view(
        run::build_run_plan(run::tensor_source(metadata, options), settings));
}

}  // namespace z2f
