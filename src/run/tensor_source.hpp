// What build_run_plan starts from: the tensors to write, in output order, with their sources,
// and the facts about the checkpoint that a run reports. Both readers produce one
// (checkpoint/routing.hpp): data_parallel_source from a ZeRO checkpoint's CheckpointMeta
// (plan_consolidation), parallel_source from a tensor-, pipeline- or expert-parallel one
// (plan_parallel_consolidation), so that selection, output files, layouts and ownership are
// planned alike for both. The format is decided here, once: --format universal plans the
// universal checkpoint's streams instead of the one stream of masters (UniversalSource). Pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "checkpoint/checkpoint_meta.hpp"
#include "checkpoint/discovery.hpp"
#include "checkpoint/parallel_meta.hpp"
#include "plan/consolidation.hpp"
#include "plan/parallel_plan.hpp"
#include "plan/tensor_plan.hpp"
#include "plan/universal_plan.hpp"
#include "zero2fp32/options.hpp"
#include "zero2fp32/plan.hpp"

namespace z2f::run {

// What universal output is planned from (run/universal_run_plan.hpp): every trainable
// parameter's three streams (plan/universal_plan.hpp), and the data-parallel view whose first
// optimizer file gives zero/optimizer_state.pt.
struct UniversalSource {
    plan::UniversalPlan plan;
    checkpoint::CheckpointMeta optimizer_meta;
};

struct TensorSource {
    checkpoint::CheckpointFiles checkpoint;  // the tag folder (and, data-parallel, its files)
    int zero_stage = 0;                      // 0: nothing partitioned
    std::uint32_t world_size = 0;            // training ranks (TP x PP x DP when parallel)
    std::string ds_version;
    plan::TensorPlan tensors;  // every tensor of the checkpoint, before selection
    std::vector<std::string> warnings;
    std::vector<std::string> notes;
    std::optional<ConversionPlan::ParallelGrid> parallel;
    // What shapes the bytes beyond the common options (parallel: the merge options and the
    // rules), for the run's identity.
    std::string identity;
    // --format universal: the universal plan, made here instead of `tensors` (which then lists
    // the inputs only, for the run's identity). Every other format: nullopt.
    std::optional<UniversalSource> universal;
};

// Either reader's assembled metadata, as the metadata phase and plan_conversion produce it.
struct CheckpointMetadata {
    std::variant<checkpoint::CheckpointMeta, checkpoint::ParallelCheckpointMeta> meta;
    std::optional<std::string> tp_rules_text;  // the --tp-rules file's content
};

plan::PlanOptions consolidation_options(const Options& options);

// The source of either kind.
TensorSource tensor_source(const CheckpointMetadata& metadata, const Options& options);

TensorSource data_parallel_source(const checkpoint::CheckpointMeta& meta, const Options& options);

// The universal plan of a data-parallel checkpoint (AutoEP's included), after the usage errors of
// `options` (which come before the checkpoint's own refusals).
UniversalSource data_parallel_universal(const checkpoint::CheckpointMeta& meta,
                                        const Options& options);

// `tp_rules_text` is the content of the file options.tp_rules names (read where the checkpoint
// was discovered); nullopt: the checkpoint's own rules.
TensorSource parallel_source(const checkpoint::ParallelCheckpointMeta& meta, const Options& options,
                             const std::optional<std::string>& tp_rules_text);

// The grid as the public plan shows it: degrees and every input with its place in the grid.
ConversionPlan::ParallelGrid describe_grid(const checkpoint::ParallelCheckpointMeta& meta);

}  // namespace z2f::run
