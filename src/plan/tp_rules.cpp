#include "plan/tp_rules.hpp"

#include <nlohmann/json.hpp>

#include "common/errors.hpp"

namespace z2f::plan {

namespace {

TpRule make_rule(TpMerge merge, std::uint64_t dim = 0) {
    TpRule rule;
    rule.merge = merge;
    rule.dim = dim;
    return rule;
}

}  // namespace

bool python_re_match(const std::regex& pattern, const std::string& name) {
    return std::regex_search(name, pattern, std::regex_constants::match_continuous);
}

TpRuleSet::Pattern TpRuleSet::compile(const std::string& text, const std::string& origin) {
    try {
        return {text, std::regex(text, std::regex::ECMAScript)};
    } catch (const std::regex_error& error) {
        throw_input_error(origin, "TP rule pattern '" + text +
                                      "' is not a regular expression this tool understands (" +
                                      error.what() + ")");
    }
}

TpRuleSet TpRuleSet::from_universal_info(const checkpoint::UniversalCheckpointInfo& info,
                                         const std::string& origin) {
    TpRuleSet set;
    set.origin_ = origin + " (universal_checkpoint_info)";
    set.original_vocab_size_ = info.original_vocab_size;
    set.version_ = info.version;
    set.autotp_ = info.autotp;
    auto level = [&](const std::vector<std::string>& patterns, TpRule rule, const char* key) {
        std::vector<Entry> entries;
        for (const std::string& text : patterns) {
            TpRule with_source = rule;
            with_source.source = std::string(key) + " '" + text + "'";
            entries.push_back({compile(text, set.origin_), with_source});
        }
        set.levels_.push_back(std::move(entries));
    };
    level(info.tp_replicated, make_rule(TpMerge::kReplicated), "tp_replicated_parameter_patterns");
    level(info.to_average, make_rule(TpMerge::kAverage), "parameter_to_average_patterns");
    TpRule two_sub = make_rule(TpMerge::kSubParams);
    two_sub.count = 2;
    level(info.two_sub_params_cat_dim_0, two_sub, "parameter_with_2_sub_params_cat_dim_0");
    std::vector<Entry> sub_entries;
    for (const checkpoint::SubParamsSpec& spec : info.sub_params) {
        TpRule rule = make_rule(TpMerge::kSubParams);
        rule.dim = spec.partition_dim;
        rule.sub_param_shape = true;
        rule.sub_spec = spec;
        if (!spec.shard_widths.empty()) {
            rule.widths = spec.shard_widths;
        } else if (info.version >= 0.4) {
            // ds_to_universal requires recorded widths from UCP 0.4 on: the head counts that
            // decide uneven widths are in the model config, not the checkpoint.
            throw_unsupported(set.origin_,
                              "parameter_with_sub_params entry for '" +
                                  (spec.patterns.empty() ? std::string() : spec.patterns.front()) +
                                  "' has no sub_param_shard_widths (universal checkpoint " +
                                  "version >= 0.4 records them): its split is unknown");
        } else if (!spec.sub_sizes.empty()) {
            rule.sub_sizes = spec.sub_sizes;
        } else {
            rule.count = spec.sub_count;
        }
        for (const std::string& text : spec.patterns) {
            TpRule with_source = rule;
            with_source.source = "parameter_with_sub_params '" + text + "'";
            sub_entries.push_back({compile(text, set.origin_), with_source});
        }
    }
    set.levels_.push_back(std::move(sub_entries));
    level(info.row_parallel, make_rule(TpMerge::kCat, 1),
          "parameter_with_row_parallelism_patterns");
    TpRule column = make_rule(TpMerge::kCat, 0);
    column.source = "the default (column-parallel, cat dim 0)";
    set.default_ = column;
    for (const std::string& text : info.vocabulary) {
        set.vocabulary_.push_back(compile(text, set.origin_));
    }
    for (const auto& [text, reason] : info.unsupported) {
        set.unsupported_.emplace_back(compile(text, set.origin_), reason);
    }
    return set;
}

namespace {

TpRule rule_from_json(const nlohmann::json& value, const std::string& origin,
                      const std::string& key) {
    auto fail = [&](const std::string& what) -> TpRule {
        throw_input_error(origin, "rule for '" + key + "': " + what);
    };
    TpRule rule;
    rule.source = "--tp-rules '" + key + "'";
    if (value.is_string()) {
        const std::string name = value.get<std::string>();
        if (name == "replicated") {
            rule.merge = TpMerge::kReplicated;
        } else if (name == "average") {
            rule.merge = TpMerge::kAverage;
        } else if (name == "column") {
            rule.dim = 0;
        } else if (name == "row") {
            rule.dim = 1;
        } else if (name == "vocabulary") {
            rule.vocabulary = true;
        } else {
            return fail("unknown rule '" + name +
                        "' (expected replicated, average, column, row, vocabulary or an object)");
        }
        return rule;
    }
    if (!value.is_object()) {
        return fail("expected a string or an object");
    }
    for (const auto& [field, item] : value.items()) {
        if (field != "merge" && field != "dim" && field != "vocabulary" && field != "count" &&
            field != "widths") {
            return fail("unknown field '" + field + "'");
        }
    }
    const std::string merge = value.value("merge", std::string("cat"));
    if (merge == "cat") {
        rule.merge = TpMerge::kCat;
    } else if (merge == "sub_params") {
        rule.merge = TpMerge::kSubParams;
    } else if (merge == "replicated") {
        rule.merge = TpMerge::kReplicated;
    } else if (merge == "average") {
        rule.merge = TpMerge::kAverage;
    } else {
        return fail("unknown merge '" + merge + "' (cat, sub_params, replicated, average)");
    }
    if (value.contains("dim")) {
        if (!value["dim"].is_number_unsigned()) {
            return fail("dim must be a non-negative integer");
        }
        rule.dim = value["dim"].get<std::uint64_t>();
    }
    if (value.contains("vocabulary")) {
        if (!value["vocabulary"].is_boolean()) {
            return fail("vocabulary must be true or false");
        }
        rule.vocabulary = value["vocabulary"].get<bool>();
    }
    if (rule.merge == TpMerge::kSubParams) {
        if (value.contains("widths")) {
            const auto& widths = value["widths"];
            if (!widths.is_array()) {
                return fail("widths must be a list of lists (sub-parameter x TP rank)");
            }
            for (const auto& per_sub : widths) {
                if (!per_sub.is_array()) {
                    return fail("widths must be a list of lists (sub-parameter x TP rank)");
                }
                std::vector<std::uint64_t> row;
                for (const auto& width : per_sub) {
                    if (!width.is_number_unsigned()) {
                        return fail("widths must be non-negative integers");
                    }
                    row.push_back(width.get<std::uint64_t>());
                }
                rule.widths.push_back(std::move(row));
            }
        } else if (value.contains("count") && value["count"].is_number_unsigned() &&
                   value["count"].get<std::uint64_t>() > 0) {
            rule.count = value["count"].get<std::uint64_t>();
        } else {
            return fail("sub_params needs a positive count or widths");
        }
    }
    return rule;
}

}  // namespace

TpRuleSet TpRuleSet::from_json(const std::string& text, const std::string& origin) {
    nlohmann::json doc;
    try {
        doc = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& error) {
        throw_input_error(origin, std::string("not valid JSON: ") + error.what());
    }
    if (!doc.is_object() || !doc.contains("rules") || !doc["rules"].is_object()) {
        throw_input_error(origin,
                          "expected an object with a \"rules\" object of regex -> rule "
                          "(docs/parallel-checkpoints.md §3.3)");
    }
    for (const auto& [field, item] : doc.items()) {
        if (field != "rules" && field != "default" && field != "original_vocab_size") {
            throw_input_error(origin, "unknown top-level field '" + field + "'");
        }
    }
    TpRuleSet set;
    set.origin_ = origin;
    std::vector<Entry> entries;
    for (const auto& [key, value] : doc["rules"].items()) {
        TpRule rule = rule_from_json(value, origin, key);
        if (rule.vocabulary) {
            set.vocabulary_.push_back(compile(key, origin));
        }
        entries.push_back({compile(key, origin), std::move(rule)});
    }
    set.levels_.push_back(std::move(entries));
    if (doc.contains("default")) {
        set.default_ = rule_from_json(doc["default"], origin, "default");
        set.default_->source = "--tp-rules default";
    }
    if (doc.contains("original_vocab_size")) {
        if (!doc["original_vocab_size"].is_number_unsigned()) {
            throw_input_error(origin, "original_vocab_size must be a non-negative integer");
        }
        set.original_vocab_size_ = doc["original_vocab_size"].get<std::int64_t>();
    }
    return set;
}

bool TpRuleSet::matches_explicitly(const std::string& name) const {
    for (const auto& level : levels_) {
        for (const Entry& entry : level) {
            if (python_re_match(entry.pattern.regex, name)) {
                return true;
            }
        }
    }
    return false;
}

bool TpRuleSet::is_vocabulary(const std::string& name) const {
    for (const Pattern& pattern : vocabulary_) {
        if (python_re_match(pattern.regex, name)) {
            return true;
        }
    }
    return false;
}

TpRule TpRuleSet::rule_for(const std::string& name) const {
    for (const auto& [pattern, reason] : unsupported_) {
        if (python_re_match(pattern.regex, name)) {
            throw_unsupported(origin_, "parameter '" + name +
                                           "' is marked unsupported by AutoTP (pattern '" +
                                           pattern.text + "'): " + reason);
        }
    }
    std::optional<TpRule> found;
    for (const auto& level : levels_) {
        const Entry* match = nullptr;
        for (const Entry& entry : level) {
            if (!python_re_match(entry.pattern.regex, name)) {
                continue;
            }
            if (match != nullptr) {
                throw_input_error(origin_, "parameter '" + name + "' matches two TP rules, " +
                                               match->rule.source + " and " + entry.rule.source);
            }
            match = &entry;
        }
        if (match != nullptr) {
            found = match->rule;
            break;
        }
    }
    if (!found) {
        if (!default_) {
            throw_input_error(
                origin_, "no TP rule matches parameter '" + name + "' (add one, or a \"default\")");
        }
        found = default_;
    }
    const Pattern* vocabulary = nullptr;
    for (const Pattern& pattern : vocabulary_) {
        if (python_re_match(pattern.regex, name)) {
            if (vocabulary != nullptr && vocabulary->text != pattern.text) {
                throw_input_error(origin_, "parameter '" + name +
                                               "' matches two vocabulary patterns, '" +
                                               vocabulary->text + "' and '" + pattern.text + "'");
            }
            vocabulary = &pattern;
        }
    }
    found->vocabulary = found->vocabulary || vocabulary != nullptr;
    return *found;
}

}  // namespace z2f::plan
