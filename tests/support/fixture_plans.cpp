#include "support/fixture_plans.hpp"

#include "checkpoint/assemble.hpp"
#include "checkpoint/discovery.hpp"
#include "support/test_files.hpp"

namespace z2f::testing {

checkpoint::CheckpointMeta fixture_meta(const std::string& fixture) {
    return checkpoint::read_checkpoint_meta(
        checkpoint::discover_checkpoint(fixture_path(fixture), ""));
}

run::RunPlan build_plan(const checkpoint::CheckpointMeta& meta, std::uint32_t ranks,
                        const Options& options) {
    run::RunSettings settings;
    settings.options = options;
    settings.ranks = ranks;
    settings.writer_version = "test";
    return run::build_run_plan(meta, settings);
}

}  // namespace z2f::testing
