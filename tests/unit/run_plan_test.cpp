// The RunPlan, built without MPI from the real fixtures' metadata: every file's tasks, owners,
// header checksums and the public view, at several rank counts.
#include "run/run_plan.hpp"

#include <algorithm>
#include <set>

#include <gtest/gtest.h>

#include "checkpoint/assemble.hpp"
#include "checkpoint/discovery.hpp"
#include "common/crc32.hpp"
#include "support/built_formats.hpp"
#include "support/expected_state.hpp"
#include "support/fixture_plans.hpp"
#include "support/test_files.hpp"
#include "zero2fp32/error.hpp"
#include "zero2fp32/plan.hpp"

namespace z2f::run {
namespace {

using testing::fixture_meta;

RunPlan build(const checkpoint::CheckpointMeta& meta, std::uint32_t ranks, Options options = {}) {
    return testing::build_plan(meta, ranks, options);
}

TEST(RunPlan, EveryFileHasContiguousTasksCoveringItsSlotsOnce) {
    for (const char* fixture : {"z3_ws2_tied_fp32", "z2_ws2_frozen_bf16", "z1_ws2_bf16opt"}) {
        checkpoint::CheckpointMeta meta = fixture_meta(fixture);
        for (OutputFormat format : testing::built_hf_formats()) {
            for (std::uint32_t ranks = 1; ranks <= 5; ++ranks) {
                for (std::optional<std::uint64_t> shard :
                     {std::optional<std::uint64_t>(3'000), std::optional<std::uint64_t>()}) {
                    Options options;
                    options.format = format;
                    options.max_shard_size = shard;
                    options.block_size = 4096;  // small fixtures: files shared by several ranks
                    RunPlan plan = build(meta, ranks, options);
                    SCOPED_TRACE(std::string(fixture) + " " + std::string(enum_name(format)) +
                                 " ranks " + std::to_string(ranks) + (shard ? " sharded" : ""));
                    std::size_t tasks_seen = 0;
                    for (std::uint32_t f = 0; f < plan.files.size(); ++f) {
                        const OutputFileRecord& file = plan.files[f];
                        ASSERT_GE(file.task_count, 1u);
                        EXPECT_EQ(plan.is_shared(f), file.task_count > 1);
                        EXPECT_TRUE(plan.lead_of(f).lead);
                        std::uint64_t next_byte = 0;
                        std::uint32_t next_slot = 0;
                        for (std::uint32_t t = file.first_task;
                             t < file.first_task + file.task_count; ++t) {
                            const plan::WriteTask& task = plan.tasks[t];
                            EXPECT_EQ(task.file, f);
                            EXPECT_EQ(task.lead, t == file.first_task);
                            EXPECT_EQ(task.begin, next_byte);
                            EXPECT_EQ(task.begin % options.block_size, 0u);
                            // A slot cut by the range boundary is in both tasks.
                            EXPECT_TRUE(task.slot_begin == next_slot ||
                                        task.slot_begin + 1 == next_slot);
                            EXPECT_LT(task.rank, ranks);
                            next_byte = task.end;
                            next_slot = task.slot_end;
                        }
                        EXPECT_EQ(next_byte, file.layout.size);
                        EXPECT_EQ(next_slot, file.layout.slots.size());
                        tasks_seen += file.task_count;
                        ASSERT_FALSE(file.layout.fixed.empty());
                        EXPECT_EQ(file.header_length, file.layout.fixed.front().bytes.size());
                        EXPECT_EQ(file.header_crc32, crc32_of(file.layout.fixed.front().bytes));
                    }
                    EXPECT_EQ(tasks_seen, plan.tasks.size());
                    std::size_t owned = 0;
                    for (std::uint32_t r = 0; r < ranks; ++r)
                        owned += plan.tasks_of(r).size();
                    EXPECT_EQ(owned, plan.tasks.size());
                }
            }
        }
    }
}

TEST(RunPlan, SameInputsGiveTheSamePlan) {
    checkpoint::CheckpointMeta meta = fixture_meta("z3_ws4_fp32");
    RunPlan a = build(meta, 3);
    RunPlan b = build(meta, 3);
    ASSERT_EQ(a.files.size(), b.files.size());
    for (std::size_t f = 0; f < a.files.size(); ++f) {
        EXPECT_EQ(a.files[f].layout.size, b.files[f].layout.size);
        EXPECT_EQ(a.files[f].header_crc32, b.files[f].header_crc32);
    }
    ASSERT_EQ(a.tasks.size(), b.tasks.size());
    for (std::size_t t = 0; t < a.tasks.size(); ++t)
        EXPECT_EQ(a.tasks[t].rank, b.tasks[t].rank);
    EXPECT_EQ(a.identity, b.identity);
    EXPECT_EQ(a.index_json, b.index_json);
}

TEST(RunPlan, IdentityChangesWithEveryOptionThatShapesTheBytes) {
    checkpoint::CheckpointMeta meta = fixture_meta("z2_ws2_frozen_bf16");
    std::set<std::string> identities{build(meta, 1).identity};
    auto differs = [&](auto tweak) {
        Options options;
        tweak(options);
        return identities.insert(build(meta, 1, options).identity).second;
    };
    EXPECT_TRUE(differs([](Options& o) { o.format = OutputFormat::kTorch; }));
    EXPECT_TRUE(differs([](Options& o) { o.dtype = DType::kBF16; }));
    EXPECT_TRUE(differs([](Options& o) { o.max_shard_size = 1'000; }));
    EXPECT_TRUE(differs([](Options& o) { o.cast_all_buffers = true; }));
    EXPECT_TRUE(differs([](Options& o) { o.keep_frozen_dtype = true; }));
    EXPECT_TRUE(differs([](Options& o) { o.exclude_frozen = true; }));
    EXPECT_TRUE(differs([](Options& o) { o.exclude.push_back("bias"); }));
    // Not shaping the bytes: the rank count, the I/O backend.
    EXPECT_EQ(build(meta, 4).identity, build(meta, 1).identity);
}

TEST(RunPlan, ResumeSkipsFilesAndWhatTheyRead) {
    checkpoint::CheckpointMeta meta = fixture_meta("z3_ws2_fp32");
    Options options;
    options.max_shard_size = 2'000;
    RunPlan plan = build(meta, 2, options);
    ASSERT_GE(plan.files.size(), 2u);
    std::uint64_t all_reads = 0;
    for (std::uint64_t bytes : plan.bytes_to_read())
        all_reads += bytes;
    std::vector<bool> skip(plan.files.size(), false);
    skip[0] = true;
    plan.apply_resume(skip);
    EXPECT_TRUE(plan.files[0].skip);
    EXPECT_EQ(plan.bytes_to_write(), plan.output_bytes() - plan.files[0].layout.size);
    std::uint64_t reads = 0;
    for (std::uint64_t bytes : plan.bytes_to_read())
        reads += bytes;
    EXPECT_LT(reads, all_reads);
    EXPECT_THROW(plan.apply_resume({true}), Error);
}

TEST(RunPlan, ReadsExactlyTheTensorBytes) {
    checkpoint::CheckpointMeta meta = fixture_meta("z3_ws2_tied_fp32");
    RunPlan plan = build(meta, 1);
    std::uint64_t expected = 0;
    for (const plan::PlannedTensor& tensor : plan.tensors.tensors) {
        if (!tensor.is_alias())
            expected += tensor.source_bytes();
    }
    std::uint64_t reads = 0;
    for (std::uint64_t bytes : plan.bytes_to_read())
        reads += bytes;
    EXPECT_EQ(reads, expected);
}

TEST(RunPlan, OptionsAreCheckedBeforeAnything) {
    checkpoint::CheckpointMeta meta = fixture_meta("z2_ws1_fp32");
    auto usage = [&](auto tweak) {
        Options options;
        tweak(options);
        try {
            validate_options(options);
        } catch (const Error& error) {
            return error.kind() == ErrorKind::kUsage;
        }
        return false;
    };
    EXPECT_TRUE(usage([](Options& o) { o.dtype = DType::kI64; }));
    EXPECT_TRUE(usage([](Options& o) { o.buffer_size = 16; }));
    EXPECT_TRUE(usage([](Options& o) { o.overwrite = o.resume = true; }));
    EXPECT_TRUE(usage([](Options& o) { o.dry_run = o.verify = true; }));
    EXPECT_TRUE(usage([](Options& o) { o.verify = o.overwrite = true; }));
    EXPECT_TRUE(usage([](Options& o) { o.verify = o.resume = true; }));
    EXPECT_FALSE(usage([](Options&) {}));
}

TEST(ConversionPlanView, NamesEveryTensorOfTheEngineInOrderWithItsFile) {
    Options options;
    options.max_shard_size = 3'000;
    ConversionPlan plan = plan_conversion(testing::fixture_path("z3_ws2_tied_fp32"), options);
    auto expected =
        testing::read_expected_state_dict(testing::fixture_path("z3_ws2_tied_fp32/expected.pt"));
    ASSERT_EQ(plan.tensors.size(), expected.size());
    std::set<std::string> files;
    for (const auto& file : plan.files)
        files.insert(file.name);
    ASSERT_TRUE(plan.index.has_value());
    for (const ConversionPlan::Tensor& tensor : plan.tensors) {
        const testing::ExpectedTensor* truth = testing::find_tensor(expected, tensor.name);
        ASSERT_NE(truth, nullptr) << tensor.name;
        EXPECT_EQ(tensor.shape, truth->shape) << tensor.name;
        EXPECT_EQ(tensor.dtype, truth->dtype) << tensor.name;
        EXPECT_EQ(files.count(tensor.file), 1u) << tensor.name << " in '" << tensor.file << "'";
        if (tensor.role == TensorRole::kAlias) {
            EXPECT_FALSE(tensor.alias_of.empty());
        }
    }
    EXPECT_EQ(plan.zero_stage, 3);
    EXPECT_EQ(plan.world_size, 2u);
}

}  // namespace
}  // namespace z2f::run
