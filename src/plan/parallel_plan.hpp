// The consolidation plan of a tensor-, pipeline- or expert-parallel checkpoint
// (docs/parallel-checkpoints.md §3-§6). Pure: a function of ParallelCheckpointMeta and the
// options, identical on every rank.
//
//   1. Each (stage, TP rank) is consolidated on its own: with ZeRO-1/2 (or BF16_Optimizer)
//      partitions by plan_consolidation's data-parallel rules, without them from the weights
//      the files hold (mp_rank `module` for TP, layer files for pipelines).
//   2. The TP ranks of a stage are merged name by name with the rules of tp_rules.hpp into
//      pieces (tp_merge.hpp); replicated tensors are checked equal, taken from rank 0 or
//      averaged (--tp-replicated); the padded vocabulary is kept unless stripping is asked.
//   3. Stages are joined in stage order; a name in several stages (tied layers) is written
//      once, at its first stage, and its copies are checked equal.
//   4. MoE (one stage, TP 1): dense groups over every rank, expert groups over the expert-data-
//      parallel ranks of each expert-parallel rank, local expert ids renamed to global ones.
// Order, names and roles per kind are in docs/parallel-checkpoints.md §4-§5.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "checkpoint/parallel_meta.hpp"
#include "plan/consolidation.hpp"
#include "plan/tensor_piece.hpp"
#include "plan/tp_rules.hpp"

namespace z2f::plan {

enum class ReplicaPolicy : std::uint8_t { kCheck, kFirst, kAverage };

struct ParallelPlanOptions {
    PlanOptions base;
    ReplicaPolicy tp_replicated = ReplicaPolicy::kCheck;  // --tp-replicated check|first|average
    bool strip_vocab_padding = false;                     // --strip-vocab-padding
    std::optional<TpRuleSet> tp_rules;                    // --tp-rules FILE (replaces the file's)
};

struct PiecedPlan {
    // Every output tensor, with its `pieces` (none for aliases) and its rule in words
    // (`merge`). Its `extents` are flatten_pieces(pieces) when flattenable (a kCheckEqual piece
    // then contributes its first replica, unchecked), empty otherwise.
    TensorPlan plan;
    std::vector<std::string> warnings;
    std::vector<std::string> notes;
};

PiecedPlan plan_parallel_consolidation(const checkpoint::ParallelCheckpointMeta& meta,
                                       const ParallelPlanOptions& options);

// The merge rules the plan applies: with TP > 1, --tp-rules or else the checkpoint's
// universal_checkpoint_info (nullopt: none, which the plan refuses); with TP = 1, the
// checkpoint's own rules when vocabulary stripping is asked (a pipeline's padded vocabulary),
// else none: a single slice needs no rule.
std::optional<TpRuleSet> merge_rules(const checkpoint::ParallelCheckpointMeta& meta,
                                     const ParallelPlanOptions& options);

}  // namespace z2f::plan
