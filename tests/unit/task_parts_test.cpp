// Task parts (run/task_parts.hpp) and the extents formulas under them: the parts of every
// task, over all tasks of a file, put every slot together exactly once, and each part's
// extents are exactly its elements' source bytes, dtype conversions included.
#include "run/task_parts.hpp"

#include <gtest/gtest.h>

#include "plan/tensor_plan.hpp"
#include "support/fixture_plans.hpp"
#include "zero2fp32/error.hpp"

namespace z2f::run {
namespace {

TEST(SubExtents, CutTheConcatenationAtAnyBytes) {
    const std::vector<SourceExtent> extents = {{0, 100, 10}, {1, 0, 5}, {0, 500, 20}};
    EXPECT_EQ(plan::sub_extents(extents, 0, 35), extents);
    EXPECT_EQ(plan::sub_extents(extents, 3, 12),
              (std::vector<SourceExtent>{{0, 103, 7}, {1, 0, 2}}));
    EXPECT_EQ(plan::sub_extents(extents, 10, 15), (std::vector<SourceExtent>{{1, 0, 5}}));
    EXPECT_EQ(plan::sub_extents(extents, 14, 16),
              (std::vector<SourceExtent>{{1, 4, 1}, {0, 500, 1}}));
    EXPECT_TRUE(plan::sub_extents(extents, 35, 35).empty());
    EXPECT_THROW(plan::sub_extents(extents, 30, 36), Error);
}

TEST(PartExtents, MapOutputElementsToTheSameSourceElements) {
    plan::PlannedTensor tensor;
    tensor.name = "w";
    tensor.shape = {8};
    tensor.source_dtype = DType::kBF16;  // 2 bytes in, 4 bytes out
    tensor.output_dtype = DType::kF32;
    tensor.extents = {{0, 1000, 6}, {1, 2000, 10}};
    // Output bytes [8, 20) are elements 2..4, source bytes [4, 10).
    EXPECT_EQ(plan::part_extents(tensor, 8, 12),
              (std::vector<SourceExtent>{{0, 1004, 2}, {1, 2000, 4}}));
    EXPECT_THROW(plan::part_extents(tensor, 2, 4), Error);  // half an element
}

TEST(TaskParts, TheTasksOfAFileTileEverySlotOnce) {
    for (const char* fixture : {"z3_ws2_tied_fp32", "z2_ws2_frozen_bf16", "z1_ws2_bf16opt"}) {
        checkpoint::CheckpointMeta meta = testing::fixture_meta(fixture);
        for (DType dtype : {DType::kF32, DType::kBF16}) {
            for (std::uint32_t ranks : {1u, 3u, 7u}) {
                SCOPED_TRACE(std::string(fixture) + " ranks " + std::to_string(ranks));
                Options options;
                options.max_shard_size.reset();
                options.block_size = 4096;
                options.dtype = dtype;
                options.format = OutputFormat::kTorch;
                RunPlan plan = testing::build_plan(meta, ranks, options);
                const OutputFileRecord& file = plan.files.at(0);
                if (ranks > 1) {
                    EXPECT_GT(file.task_count, 1u) << "the test needs a shared file";
                }
                std::vector<std::uint64_t> covered(file.layout.slots.size(), 0);
                std::vector<std::vector<SourceExtent>> joined(file.layout.slots.size());
                for (std::uint32_t t = file.first_task; t < file.first_task + file.task_count;
                     ++t) {
                    const plan::WriteTask& task = plan.tasks[t];
                    for (const SlotPart& part : slot_parts(plan, task)) {
                        const output::TensorSlot& slot = file.layout.slots.at(part.slot);
                        EXPECT_EQ(part.skip, covered[part.slot]);
                        EXPECT_EQ(part.offset, slot.offset + part.skip);
                        EXPECT_GE(part.offset, task.begin);
                        EXPECT_LE(part.offset + part.length, task.end);
                        EXPECT_EQ(part.whole, part.length == slot.length);
                        covered[part.slot] += part.length;
                        joined[part.slot].insert(joined[part.slot].end(), part.extents.begin(),
                                                 part.extents.end());
                    }
                    for (const ClippedRegion& region :
                         clip_regions(file.layout.fixed, task.begin, task.end)) {
                        EXPECT_GE(region.offset, task.begin);
                        EXPECT_LE(region.offset + region.bytes.size(), task.end);
                    }
                }
                for (std::size_t s = 0; s < covered.size(); ++s) {
                    const output::TensorSlot& slot = file.layout.slots[s];
                    EXPECT_EQ(covered[s], slot.length);
                    // The parts' extents, merged where they touch, are the tensor's.
                    std::vector<SourceExtent> merged;
                    for (const SourceExtent& extent : joined[s]) {
                        if (extent.length == 0)
                            continue;
                        if (!merged.empty() && merged.back().file == extent.file &&
                            merged.back().offset + merged.back().length == extent.offset)
                            merged.back().length += extent.length;
                        else
                            merged.push_back(extent);
                    }
                    std::vector<SourceExtent> whole;
                    for (const SourceExtent& extent : plan.source_of(slot.tensor).extents) {
                        if (!whole.empty() && whole.back().file == extent.file &&
                            whole.back().offset + whole.back().length == extent.offset)
                            whole.back().length += extent.length;
                        else if (extent.length > 0)
                            whole.push_back(extent);  // (a first empty one is kept: rare)
                    }
                    EXPECT_EQ(merged, whole) << "slot " << s;
                }
            }
        }
    }
}

}  // namespace
}  // namespace z2f::run
