#include "run/plan_in_process.hpp"

#include "checkpoint/assemble.hpp"
#include "checkpoint/parallel_assemble.hpp"
#include "checkpoint/routing.hpp"
#include "checkpoint/universal_assemble.hpp"
#include "zero2fp32/version.hpp"

namespace z2f::run {

RunPlan plan_in_process(const std::filesystem::path& checkpoint, const Options& options,
                        std::uint32_t ranks) {
    validate_options(options);
    checkpoint::DiscoveredCheckpoint found = checkpoint::discover_any_checkpoint(
        checkpoint.string(), options.tag, checkpoint::DiscoveryOptions{options.from_universal});
    CheckpointMetadata metadata;
    if (const auto* grid = std::get_if<checkpoint::FileGrid>(&found.files)) {
        if (!options.tp_rules.empty())
            metadata.tp_rules_text = checkpoint::read_tp_rules_file(options.tp_rules);
        metadata.meta = checkpoint::read_parallel_checkpoint_meta(*grid);
    } else if (const auto* universal = std::get_if<checkpoint::UniversalFolder>(&found.files)) {
        metadata.meta = checkpoint::read_universal_checkpoint_meta(*universal);
    } else {
        metadata.meta =
            checkpoint::read_checkpoint_meta(std::get<checkpoint::CheckpointFiles>(found.files));
    }
    RunSettings settings;
    settings.options = options;
    settings.ranks = ranks;
    settings.writer_version = kVersion;
    return build_run_plan(tensor_source(metadata, options), settings);
}

}  // namespace z2f::run
