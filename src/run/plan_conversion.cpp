// z2f::plan_conversion (zero2fp32/plan.hpp): the plan of a conversion in one process, without
// MPI. The same discovery, metadata and RunPlan as z2f::convert, read serially.
#include "checkpoint/assemble.hpp"
#include "checkpoint/discovery.hpp"
#include "run/run_plan.hpp"
#include "zero2fp32/plan.hpp"
#include "zero2fp32/version.hpp"

namespace z2f {

ConversionPlan plan_conversion(const std::filesystem::path& checkpoint, const Options& options) {
    run::validate_options(options);
    checkpoint::CheckpointFiles files = checkpoint::discover_checkpoint(
        checkpoint.string(), options.tag, checkpoint::DiscoveryOptions{options.from_universal});
    run::RunSettings settings;
    settings.options = options;
    settings.ranks = 1;
    settings.writer_version = kVersion;
    return run::conversion_plan_view(
        run::build_run_plan(checkpoint::read_checkpoint_meta(files), settings));
}

}  // namespace z2f
