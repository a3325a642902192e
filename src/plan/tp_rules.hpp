// Which TP merge rule applies to which parameter (docs/parallel-checkpoints.md §3).
//
// From the checkpoint's universal_checkpoint_info (Megatron-DeepSpeed, AutoTP), in DeepSpeed
// ds_to_universal's order of precedence:
//   1. tp_replicated_parameter_patterns            replicated
//   2. parameter_to_average_patterns               average over the TP ranks
//   3. parameter_with_2_sub_params_cat_dim_0       two fused sub-parameters along dim 0
//   4. parameter_with_sub_params (+ sub_param_shard_widths)   K fused sub-parameters along
//                                                  partition_dim, widths recorded or even
//   5. parameter_with_row_parallelism_patterns     cat along dim 1
//   6. anything else                               cat along dim 0 (column-parallel)
// and, on top of the merge, vocabulary_parameter_patterns marks the padded vocabulary (dim 0,
// original_vocab_size real rows). A name matched by an autotp_unsupported_parameter_patterns
// entry is refused with the recorded reason. Patterns are Python regexes applied like re.match:
// anchored at the start of the name only; a name matched by two patterns of one list is an
// error, as in DeepSpeed.
//
// From a --tp-rules JSON file (for checkpoints that carry no rules):
//   {
//     "original_vocab_size": 50257,                 optional: rows kept by vocabulary stripping
//     "default": "column",                          optional: the rule of unmatched names
//     "rules": {
//       "<regex>": "replicated" | "average" | "column" | "row" | "vocabulary",
//       "<regex>": {"merge": "cat", "dim": 2, "vocabulary": false},
//       "<regex>": {"merge": "sub_params", "dim": 0, "count": 2},
//       "<regex>": {"merge": "sub_params", "dim": 0, "widths": [[4, 4], [2, 2]]},
//       ...
//     }
//   }
// "column" is cat dim 0, "row" cat dim 1, "vocabulary" cat dim 0 of a padded vocabulary.
// Regexes are matched like the checkpoint's; a name matched by two entries is an error, and
// without "default" so is a name matched by none.
#pragma once

#include <cstdint>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "checkpoint/parallel_meta.hpp"

namespace z2f::plan {

enum class TpMerge : std::uint8_t { kReplicated, kAverage, kCat, kSubParams };

struct TpRule {
    TpMerge merge = TpMerge::kCat;
    std::uint64_t dim = 0;  // kCat, kSubParams
    bool vocabulary = false;
    // kSubParams: either explicit widths [sub-parameter][TP rank] or a count of equal parts
    // (each split evenly over the ranks).
    std::vector<std::vector<std::uint64_t>> widths;
    std::vector<std::uint64_t> sub_sizes;  // full sizes of each sub-parameter (split evenly)
    std::uint64_t count = 0;
    // A parameter_with_sub_params entry of universal_checkpoint_info: DeepSpeed's converter
    // describes it in a universal checkpoint by its sub_param_shape object, not by a count.
    bool sub_param_shape = false;
    // That entry itself, written again as the sub_param_shape object of a universal checkpoint.
    std::optional<checkpoint::SubParamsSpec> sub_spec;
    std::string source;  // which pattern decided, for messages
};

class TpRuleSet {
  public:
    static TpRuleSet from_universal_info(const checkpoint::UniversalCheckpointInfo& info,
                                         const std::string& origin);
    // The --tp-rules file's text; `origin` names it in messages.
    static TpRuleSet from_json(const std::string& text, const std::string& origin);

    // The rule for one parameter, or an error naming it (unsupported, ambiguous, unmatched).
    TpRule rule_for(const std::string& name) const;
    bool matches_explicitly(const std::string& name) const;
    // True when a vocabulary pattern matches `name` (whatever its merge rule).
    bool is_vocabulary(const std::string& name) const;
    std::int64_t original_vocab_size() const noexcept { return original_vocab_size_; }
    // universal_checkpoint_version of the checkpoint's rules (0 for a --tp-rules file), and
    // whether AutoTP wrote them (checkpoint/parallel_meta.hpp).
    double version() const noexcept { return version_; }
    bool autotp() const noexcept { return autotp_; }
    const std::string& origin() const noexcept { return origin_; }

  private:
    struct Pattern {
        std::string text;
        std::regex regex;
    };
    struct Entry {
        Pattern pattern;
        TpRule rule;
    };
    // One list per precedence level (universal info), or one list (JSON).
    std::vector<std::vector<Entry>> levels_;
    std::vector<Pattern> vocabulary_;
    std::vector<std::pair<Pattern, std::string>> unsupported_;
    std::optional<TpRule> default_;
    std::int64_t original_vocab_size_ = -1;
    double version_ = 0.0;
    bool autotp_ = false;
    std::string origin_;

    static Pattern compile(const std::string& text, const std::string& origin);
};

// re.match: `pattern` matches a prefix of `name`.
bool python_re_match(const std::regex& pattern, const std::string& name);

}  // namespace z2f::plan
