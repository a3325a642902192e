// The layout formulas of the consolidation plan, on hand-built checkpoints
// (docs/deepspeed-format.md §5, §6.2, §6.3): every element of every parameter must come from the
// rank and offset the formulas give, for W = 1..8, parameters smaller than W, empty parameters,
// several groups and sub-groups, ZeRO-2 alignment padding and BF16_Optimizer padding.
#include <random>
#include <tuple>

#include <gtest/gtest.h>

#include "common/errors.hpp"
#include "plan/consolidation.hpp"
#include "support/synthetic_meta.hpp"

namespace z2f {
namespace {

using testing::numel_of;
using testing::SyntheticParam;

struct Element {
    std::uint32_t rank;
    std::size_t group;
    std::uint64_t index;  // element index inside that rank's master tensor of the group
    friend bool operator==(const Element&, const Element&) = default;
};

std::vector<Element> decode(const plan::PlannedTensor& tensor) {
    std::vector<Element> out;
    for (const SourceExtent& extent : tensor.extents) {
        EXPECT_EQ(extent.length % 4, 0u);
        for (std::uint64_t b = 0; b < extent.length; b += 4) {
            std::uint64_t offset = extent.offset + b;
            auto rank = static_cast<std::uint32_t>(offset >> 32);
            std::size_t group = (offset >> 24) & 0xFF;
            std::uint64_t index = ((offset & 0xFFFFFF) - 4096) / 4;
            EXPECT_EQ(testing::synthetic_master_offset(rank, group) + 4 * index, offset);
            out.push_back({rank, group, index});
        }
    }
    return out;
}

std::vector<std::vector<SyntheticParam>> random_groups(std::mt19937& rng, std::size_t groups,
                                                       std::size_t max_params,
                                                       std::uint64_t max_dim) {
    std::vector<std::vector<SyntheticParam>> out(groups);
    int id = 0;
    for (auto& group : out) {
        std::size_t count = 1 + rng() % max_params;
        for (std::size_t i = 0; i < count; ++i) {
            std::vector<std::uint64_t> shape;
            switch (rng() % 4) {
                case 0:
                    shape = {};
                    break;  // 0-dim scalar
                case 1:
                    shape = {rng() % 3};
                    break;  // tiny, possibly empty
                case 2:
                    shape = {1 + rng() % max_dim};
                    break;
                default:
                    shape = {1 + rng() % max_dim, 1 + rng() % 7};
                    break;
            }
            group.push_back({"p" + std::to_string(id++), shape});
        }
    }
    return out;
}

TEST(PlanLayout, Stage12ElementsFollowThePartitionFormula) {
    std::mt19937 rng(1234);
    for (std::uint32_t world = 1; world <= 8; ++world) {
        for (bool bf16_optimizer : {false, true}) {
            for (int trial = 0; trial < 20; ++trial) {
                auto groups = random_groups(rng, 1 + rng() % 3, 6, 40);
                checkpoint::CheckpointMeta meta =
                    testing::synthetic_stage12(world, groups, bf16_optimizer);
                plan::ConsolidationPlan result =
                    plan::plan_consolidation(meta, plan::PlanOptions{});
                std::size_t t = 0;
                for (std::size_t g = 0; g < groups.size(); ++g) {
                    std::uint64_t total = 0;
                    for (const auto& p : groups[g])
                        total += numel_of(p.shape);
                    std::uint64_t align = 2 * std::uint64_t{world};
                    std::uint64_t part = (total + align - 1) / align * align / world;
                    std::uint64_t flat = 0;
                    for (const auto& p : groups[g]) {
                        const plan::PlannedTensor& tensor = result.plan.tensors[t++];
                        ASSERT_EQ(tensor.name, p.name);
                        std::vector<Element> expected;
                        for (std::uint64_t e = 0; e < numel_of(p.shape); ++e) {
                            std::uint64_t f = flat + e;
                            expected.push_back({static_cast<std::uint32_t>(f / part), g, f % part});
                        }
                        EXPECT_EQ(decode(tensor), expected)
                            << "W=" << world << " group " << g << " " << p.name;
                        EXPECT_EQ(tensor.source_bytes(), 4 * numel_of(p.shape));
                        flat += numel_of(p.shape);
                    }
                }
                EXPECT_EQ(t, result.plan.tensors.size());
            }
        }
    }
}

TEST(PlanLayout, Stage3ElementsFollowThePaddedSliceFormula) {
    std::mt19937 rng(99);
    for (std::uint32_t world = 1; world <= 8; ++world) {
        for (int trial = 0; trial < 20; ++trial) {
            auto subgroups = random_groups(rng, 1 + rng() % 3, 5, 30);
            checkpoint::CheckpointMeta meta = testing::synthetic_stage3(world, subgroups);
            plan::ConsolidationPlan result = plan::plan_consolidation(meta, plan::PlanOptions{});
            std::size_t t = 0;
            for (std::size_t j = 0; j < subgroups.size(); ++j) {
                std::uint64_t offset = 0;  // parameter slot offset inside sub-group j
                for (const auto& p : subgroups[j]) {
                    const plan::PlannedTensor& tensor = result.plan.tensors[t++];
                    ASSERT_EQ(tensor.name, p.name);
                    std::uint64_t n = numel_of(p.shape);
                    std::uint64_t part = (n + world - 1) / world;
                    std::vector<Element> expected;
                    for (std::uint64_t e = 0; e < n; ++e) {
                        expected.push_back(
                            {static_cast<std::uint32_t>(e / part), j, offset + e % part});
                    }
                    EXPECT_EQ(decode(tensor), expected) << "W=" << world << " " << p.name;
                    offset += part;
                }
            }
        }
    }
}

TEST(PlanLayout, Stage3SliceCoversEveryElementOnceAndPadsTheRest) {
    for (std::uint32_t world = 1; world <= 9; ++world) {
        for (std::uint64_t numel : std::initializer_list<std::uint64_t>{0, 1, 2, 7, 8, 9, 100}) {
            std::uint64_t next = 0;
            for (std::uint32_t r = 0; r < world; ++r) {
                plan::Stage3Slice slice = plan::stage3_slice(numel, world, r);
                EXPECT_EQ(slice.per_rank, (numel + world - 1) / world);
                EXPECT_LE(slice.count, slice.per_rank);
                if (slice.count > 0) {
                    EXPECT_EQ(slice.begin, next);
                    next += slice.count;
                }
            }
            EXPECT_EQ(next, numel) << numel << " over " << world;
        }
    }
    // 5 elements over 4 ranks: 2, 2, 1, 0 real elements.
    EXPECT_EQ(plan::stage3_slice(5, 4, 2).count, 1u);
    EXPECT_EQ(plan::stage3_slice(5, 4, 3).count, 0u);
    EXPECT_EQ(plan::stage3_slice(5, 4, 3).begin, 5u);
}

TEST(PlanLayout, WorkedExamplesFromTheFormatNotes) {
    // §6.2: W=4, A (3,5) + B (2,): aligned 24, P=6, saved lengths 6, 6, 5, 0.
    checkpoint::CheckpointMeta z2 = testing::synthetic_stage12(4, {{{"A", {3, 5}}, {"B", {2}}}});
    EXPECT_EQ(z2.optim[2].master[0].numel, 5u);
    EXPECT_EQ(z2.optim[3].master[0].numel, 0u);
    plan::ConsolidationPlan plan2 = plan::plan_consolidation(z2, plan::PlanOptions{});
    std::vector<Element> b = decode(plan2.plan.tensors[1]);
    EXPECT_EQ(b, (std::vector<Element>{{2, 0, 3}, {2, 0, 4}}));  // rank 2 holds A[12:15] + B
    // §6.3: W=4, A (3,5) -> P=4, B (2,) -> P=1; each rank's flat has 5 elements.
    checkpoint::CheckpointMeta z3 = testing::synthetic_stage3(4, {{{"A", {3, 5}}, {"B", {2}}}});
    EXPECT_EQ(z3.optim[0].master[0].numel, 5u);
    plan::ConsolidationPlan plan3 = plan::plan_consolidation(z3, plan::PlanOptions{});
    EXPECT_EQ(decode(plan3.plan.tensors[1]), (std::vector<Element>{{0, 0, 4}, {1, 0, 4}}));
    std::vector<Element> a = decode(plan3.plan.tensors[0]);
    ASSERT_EQ(a.size(), 15u);
    EXPECT_EQ(a[12], (Element{3, 0, 0}));
    EXPECT_EQ(a[14], (Element{3, 0, 2}));
}

TEST(PlanLayout, ExtentsOfOneFileMergeAndEmptyTensorsHaveNone) {
    checkpoint::CheckpointMeta z2 =
        testing::synthetic_stage12(2, {{{"w", {10, 10}}, {"empty", {0, 4}}, {"s", {}}}});
    plan::ConsolidationPlan plan = plan::plan_consolidation(z2, plan::PlanOptions{});
    EXPECT_EQ(plan.plan.tensors[0].extents.size(), 2u);  // split across the two ranks
    EXPECT_TRUE(plan.plan.tensors[1].extents.empty());
    EXPECT_EQ(plan.plan.tensors[1].numel(), 0u);
    EXPECT_EQ(plan.plan.tensors[2].numel(), 1u);
}

TEST(PlanLayout, Stage3FrozenFragmentsSplitLikeParameters) {
    checkpoint::CheckpointMeta meta = testing::synthetic_stage3(3, {{{"t", {4}}}});
    meta.model.frozen_param_shapes = std::vector<checkpoint::NamedShape>{{"frozen", {7}}};
    for (std::uint32_t r = 0; r < 3; ++r) {
        checkpoint::TensorRef fragment;
        fragment.file = r;
        fragment.dtype = DType::kBF16;
        fragment.shape = {3};
        fragment.numel = 3;  // ceil(7 / 3)
        fragment.offset = 1000 + 100 * r;
        fragment.length = 6;
        meta.frozen_fragments_by_rank[r].push_back({"frozen", fragment});
    }
    plan::ConsolidationPlan plan = plan::plan_consolidation(meta, plan::PlanOptions{});
    const plan::PlannedTensor& frozen = plan.plan.tensors[0];
    EXPECT_EQ(frozen.role, TensorRole::kFrozen);
    EXPECT_EQ(frozen.source_dtype, DType::kBF16);
    EXPECT_EQ(frozen.output_dtype, DType::kF32);
    EXPECT_EQ(frozen.extents,
              (std::vector<SourceExtent>{{0, 1000, 6}, {1, 1100, 6}, {2, 1200, 2}}));

    meta.frozen_fragments_by_rank[1][0].tensor.numel = 2;
    try {
        plan::plan_consolidation(meta, plan::PlanOptions{});
        FAIL();
    } catch (const Error& error) {
        EXPECT_NE(std::string(error.what()).find("expected ceil(7 / 3) = 3"), std::string::npos)
            << error.what();
    }
}

TEST(PlanLayout, ConsumedNumelsMismatchIsReported) {
    checkpoint::CheckpointMeta meta = testing::synthetic_stage12(2, {{{"a", {10}}, {"b", {6}}}});
    meta.model.param_shapes->at(0).push_back({"c", {9}});  // more than the partitions hold
    try {
        plan::plan_consolidation(meta, plan::PlanOptions{});
        FAIL();
    } catch (const Error& error) {
        EXPECT_NE(std::string(error.what()).find("need more than the 16 elements"),
                  std::string::npos)
            << error.what();
    }
    checkpoint::CheckpointMeta fewer = testing::synthetic_stage12(2, {{{"a", {10}}, {"b", {6}}}});
    fewer.model.param_shapes->at(0).pop_back();  // 10 of 16: beyond the 2W padding tolerance
    try {
        plan::plan_consolidation(fewer, plan::PlanOptions{});
        FAIL();
    } catch (const Error& error) {
        EXPECT_NE(std::string(error.what()).find("consumed 12 numels out of 16"), std::string::npos)
            << error.what();
    }
    checkpoint::CheckpointMeta groups = testing::synthetic_stage12(2, {{{"a", {10}}}});
    groups.model.param_shapes->push_back({{"x", {1}}});
    try {
        plan::plan_consolidation(groups, plan::PlanOptions{});
        FAIL();
    } catch (const Error& error) {
        EXPECT_NE(std::string(error.what())
                      .find("lists 2 parameter groups but the optimizer files hold 1"),
                  std::string::npos);
    }
}

TEST(PlanLayout, Stage3ChecksPerRankTotals) {
    checkpoint::CheckpointMeta meta = testing::synthetic_stage3(2, {{{"a", {10}}}});
    meta.optim[1].master[0].numel = 4;
    try {
        plan::plan_consolidation(meta, plan::PlanOptions{});
        FAIL();
    } catch (const Error& error) {
        EXPECT_NE(std::string(error.what()).find("every rank's partition must have the same size"),
                  std::string::npos);
    }
    checkpoint::CheckpointMeta short_meta = testing::synthetic_stage3(2, {{{"a", {10}}}});
    short_meta.model.param_shapes->at(0).push_back({"b", {4}});
    try {
        plan::plan_consolidation(short_meta, plan::PlanOptions{});
        FAIL();
    } catch (const Error& error) {
        EXPECT_NE(std::string(error.what()).find("consumed 14 numels out of 10"), std::string::npos)
            << error.what();
    }
    checkpoint::CheckpointMeta nvme = testing::synthetic_stage3(2, {{{"a", {10}}}});
    for (auto& optim : nvme.optim)
        optim.master[0].numel = 0;
    nvme.files.has_offloaded_tensors = true;
    try {
        plan::plan_consolidation(nvme, plan::PlanOptions{});
        FAIL();
    } catch (const Error& error) {
        EXPECT_EQ(error.kind(), ErrorKind::kUnsupported);
        EXPECT_NE(std::string(error.what()).find("NVMe"), std::string::npos);
    }
}

TEST(PlanLayout, DuplicateNamesAndAliases) {
    checkpoint::CheckpointMeta meta = testing::synthetic_stage12(2, {{{"a", {4}}, {"a", {2}}}});
    try {
        plan::plan_consolidation(meta, plan::PlanOptions{});
        FAIL();
    } catch (const Error& error) {
        EXPECT_NE(std::string(error.what()).find("tensor name 'a' appears twice"),
                  std::string::npos);
    }
    checkpoint::CheckpointMeta tied =
        testing::synthetic_stage12(2, {{{"embed", {4, 2}}, {"b", {2}}}});
    tied.model.shared_params = std::vector<std::pair<std::string, std::string>>{
        {"head", "embed"}, {"gone", "missing_owner"}};
    plan::ConsolidationPlan plan = plan::plan_consolidation(tied, plan::PlanOptions{});
    ASSERT_EQ(plan.plan.tensors.size(), 3u);
    EXPECT_EQ(plan.plan.tensors[2].name, "head");
    EXPECT_EQ(plan.plan.tensors[2].alias_of, 0);
    EXPECT_EQ(plan.plan.tensors[2].shape, (std::vector<std::uint64_t>{4, 2}));
}

TEST(PlanLayout, Stage1FrozenParametersComeFromTheModule) {
    checkpoint::CheckpointMeta meta = testing::synthetic_stage12(2, {{{"w", {4}}}});
    meta.model.module_tensors.push_back(
        {"w", checkpoint::TensorRef{0, DType::kBF16, {4}, 4, 64, 8}});
    meta.model.module_tensors.push_back(
        {"frozen", checkpoint::TensorRef{0, DType::kBF16, {3}, 3, 128, 6}});
    meta.model.module_tensors.push_back(
        {"buf", checkpoint::TensorRef{0, DType::kI64, {2}, 2, 192, 16}});
    meta.model.buffer_names = {"buf"};
    plan::ConsolidationPlan plan = plan::plan_consolidation(meta, plan::PlanOptions{});
    ASSERT_EQ(plan.plan.tensors.size(), 3u);
    EXPECT_EQ(plan.plan.tensors[0].name, "buf");
    EXPECT_EQ(plan.plan.tensors[0].output_dtype, DType::kI64);
    EXPECT_EQ(plan.plan.tensors[1].name, "frozen");
    EXPECT_EQ(plan.plan.tensors[1].role, TensorRole::kFrozen);
    EXPECT_EQ(plan.plan.tensors[1].extents, (std::vector<SourceExtent>{{0, 128, 6}}));
    plan::PlanOptions skip;
    skip.stage1_frozen = Stage1Frozen::kSkip;
    plan::ConsolidationPlan skipped = plan::plan_consolidation(meta, skip);
    EXPECT_EQ(skipped.plan.tensors.size(), 2u);
    EXPECT_EQ(skipped.warnings.size(), 1u);
    plan::PlanOptions exclude;
    exclude.exclude_frozen = true;
    EXPECT_EQ(plan::plan_consolidation(meta, exclude).plan.tensors.size(), 2u);
}

TEST(PlanLayout, TiesAreInferredFromSharedModuleStorageWithoutSharedParams) {
    checkpoint::CheckpointMeta meta = testing::synthetic_stage12(2, {{{"embed", {4}}}});
    meta.model.shared_params.reset();  // DeepSpeed < 0.9.2
    meta.model.module_tensors.push_back(
        {"embed", checkpoint::TensorRef{0, DType::kBF16, {4}, 4, 64, 8}});
    meta.model.module_tensors.push_back(
        {"head", checkpoint::TensorRef{0, DType::kBF16, {4}, 4, 64, 8}});
    plan::ConsolidationPlan plan = plan::plan_consolidation(meta, plan::PlanOptions{});
    ASSERT_EQ(plan.plan.tensors.size(), 2u);
    EXPECT_EQ(plan.plan.tensors[1].name, "head");
    EXPECT_EQ(plan.plan.tensors[1].role, TensorRole::kAlias);
}

}  // namespace
}  // namespace z2f
