// Which merge rule a parameter gets: universal_checkpoint_info precedence, re.match anchoring,
// ambiguity, AutoTP's unsupported patterns and sub-parameter widths, and the --tp-rules JSON.
#include "plan/tp_rules.hpp"

#include <gtest/gtest.h>

#include "zero2fp32/error.hpp"

namespace z2f::plan {
namespace {

checkpoint::UniversalCheckpointInfo megatron_info() {
    checkpoint::UniversalCheckpointInfo info;
    info.vocabulary = {"lm\\.embed\\.weight"};
    info.tp_replicated = {"lm\\.layers\\.\\d+\\.norm\\.", "lm\\.layers\\.\\d+\\.out\\.bias"};
    info.row_parallel = {"lm\\.layers\\.\\d+\\.out\\.weight"};
    info.to_average = {"lm\\.scale"};
    info.two_sub_params_cat_dim_0 = {"lm\\.layers\\.1\\.fc\\."};
    info.original_vocab_size = 50;
    return info;
}

TEST(TpRules, UniversalCheckpointInfoPrecedence) {
    TpRuleSet rules = TpRuleSet::from_universal_info(megatron_info(), "m.pt");
    EXPECT_EQ(rules.rule_for("lm.layers.0.norm.weight").merge, TpMerge::kReplicated);
    EXPECT_EQ(rules.rule_for("lm.layers.3.out.bias").merge, TpMerge::kReplicated);
    TpRule row = rules.rule_for("lm.layers.3.out.weight");
    EXPECT_EQ(row.merge, TpMerge::kCat);
    EXPECT_EQ(row.dim, 1u);
    EXPECT_EQ(rules.rule_for("lm.scale").merge, TpMerge::kAverage);
    TpRule fused = rules.rule_for("lm.layers.1.fc.weight");
    EXPECT_EQ(fused.merge, TpMerge::kSubParams);
    EXPECT_EQ(fused.count, 2u);
    TpRule column = rules.rule_for("lm.layers.0.fc.weight");
    EXPECT_EQ(column.merge, TpMerge::kCat);
    EXPECT_EQ(column.dim, 0u);
    EXPECT_FALSE(column.vocabulary);
    TpRule vocab = rules.rule_for("lm.embed.weight");
    EXPECT_TRUE(vocab.vocabulary);
    EXPECT_EQ(vocab.dim, 0u);
    // re.match: anchored at the start only.
    EXPECT_TRUE(rules.rule_for("lm.layers.0.norm.weight_extra").merge == TpMerge::kReplicated);
    EXPECT_EQ(rules.rule_for("x.lm.layers.0.norm.weight").merge, TpMerge::kCat);
    EXPECT_EQ(rules.original_vocab_size(), 50);
}

TEST(TpRules, AmbiguityUnsupportedAndBadPatterns) {
    auto info = megatron_info();
    info.tp_replicated.push_back("lm\\.layers\\.0\\.");
    TpRuleSet rules = TpRuleSet::from_universal_info(info, "m.pt");
    EXPECT_THROW(rules.rule_for("lm.layers.0.norm.bias"), Error);
    info = megatron_info();
    info.unsupported = {{"^lm\\.odd$", "fused in an unknown way"}};
    try {
        TpRuleSet::from_universal_info(info, "m.pt").rule_for("lm.odd");
        FAIL();
    } catch (const Error& error) {
        EXPECT_EQ(error.kind(), ErrorKind::kUnsupported);
        EXPECT_NE(std::string(error.what()).find("fused in an unknown way"), std::string::npos);
    }
    info = megatron_info();
    info.row_parallel = {"(unclosed"};
    EXPECT_THROW(TpRuleSet::from_universal_info(info, "m.pt"), Error);
}

TEST(TpRules, AutoTpSubParams) {
    checkpoint::UniversalCheckpointInfo info;
    info.version = 0.4;
    checkpoint::SubParamsSpec qkv;
    qkv.patterns = {"^m\\.qkv\\.weight$"};
    qkv.partition_dim = 0;
    qkv.sub_sizes = {8, 4, 4};
    qkv.shard_widths = {{4, 4}, {2, 2}, {2, 2}};
    info.sub_params.push_back(qkv);
    TpRule rule = TpRuleSet::from_universal_info(info, "m.pt").rule_for("m.qkv.weight");
    EXPECT_EQ(rule.merge, TpMerge::kSubParams);
    EXPECT_EQ(rule.widths, qkv.shard_widths);
    // From version 0.4 on, widths must be recorded.
    info.sub_params.front().shard_widths.clear();
    EXPECT_THROW(TpRuleSet::from_universal_info(info, "m.pt"), Error);
    info.version = 0.2;
    EXPECT_EQ(TpRuleSet::from_universal_info(info, "m.pt").rule_for("m.qkv.weight").sub_sizes,
              (std::vector<std::uint64_t>{8, 4, 4}));
}

TEST(TpRules, JsonFile) {
    TpRuleSet rules = TpRuleSet::from_json(R"({
        "original_vocab_size": 100,
        "rules": {
            "emb\\.": "vocabulary",
            "norm\\.": "replicated",
            "out\\.weight": "row",
            "qkv\\.": {"merge": "sub_params", "dim": 0, "widths": [[2, 2], [1, 1]]},
            "conv\\.": {"merge": "cat", "dim": 2}
        }})",
                                           "r.json");
    EXPECT_TRUE(rules.rule_for("emb.weight").vocabulary);
    EXPECT_EQ(rules.rule_for("norm.bias").merge, TpMerge::kReplicated);
    EXPECT_EQ(rules.rule_for("out.weight").dim, 1u);
    EXPECT_EQ(rules.rule_for("qkv.w").widths.size(), 2u);
    EXPECT_EQ(rules.rule_for("conv.k").dim, 2u);
    EXPECT_EQ(rules.original_vocab_size(), 100);
    EXPECT_THROW(rules.rule_for("other"), Error);  // no default: unmatched names are errors
    EXPECT_THROW(TpRuleSet::from_json("{", "r.json"), Error);
    EXPECT_THROW(TpRuleSet::from_json(R"({"rules": {"a": "diagonal"}})", "r.json"), Error);
    EXPECT_THROW(TpRuleSet::from_json(R"({"rules": {}, "extra": 1})", "r.json"), Error);
    EXPECT_THROW(TpRuleSet::from_json(R"({"rules": {"a": {"merge": "sub_params"}}})", "r.json"),
                 Error);
    TpRuleSet with_default =
        TpRuleSet::from_json(R"({"default": "column", "rules": {"a": "row", "ab": "row"}})", "r");
    EXPECT_EQ(with_default.rule_for("zzz").dim, 0u);
    EXPECT_THROW(with_default.rule_for("abc"), Error);  // two entries match
}

}  // namespace
}  // namespace z2f::plan
