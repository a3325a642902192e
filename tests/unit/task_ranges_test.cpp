// What a task hands to the copy engine (driver/execute/task_ranges.hpp, task_copies.hpp), without
// any I/O: the pieces of every task tile its byte range in file order with the right kinds, each
// slot part is one copy with its tensor's dtypes, a rank writes its own unskipped tasks smallest
// first, and the read spans of a rank's tasks cover every byte its copies read.
#include "driver/execute/task_ranges.hpp"

#include <gtest/gtest.h>

#include "driver/execute/task_copies.hpp"
#include "support/fixture_plans.hpp"

namespace z2f::driver {
namespace {

struct Case {
    const char* fixture;
    OutputFormat format;
    std::uint32_t ranks;
};

TEST(TaskRanges, PiecesTileEveryTaskRangeInFileOrder) {
    for (const Case& c : {Case{"z3_ws2_tied_fp32", OutputFormat::kTorch, 3},
                          Case{"z2_ws2_frozen_bf16", OutputFormat::kSafetensors, 2},
                          Case{"z3_ws4_fp32", OutputFormat::kTorch, 1}}) {
        SCOPED_TRACE(c.fixture);
        Options options;
        options.format = c.format;
        options.max_shard_size.reset();
        options.block_size = 4096;  // one file cut between the ranks
        const run::RunPlan plan =
            testing::build_plan(testing::fixture_meta(c.fixture), c.ranks, options);
        std::size_t deferred = 0;
        for (const plan::WriteTask& task : plan.tasks) {
            const output::OutputFileLayout& layout = plan.files[task.file].layout;
            const std::vector<run::SlotPart> parts = run::slot_parts(plan, task);
            const std::vector<io::RangePiece> pieces =
                range_pieces(layout, task, parts, output::crc_tail_placements(layout));
            std::uint64_t at = task.begin;
            std::size_t slots = 0;
            for (const io::RangePiece& piece : pieces) {
                ASSERT_EQ(piece.offset, at) << "a gap or an overlap in the range";
                at += piece.length;
                switch (piece.kind) {
                    case io::RangePiece::Kind::kSlot:
                        EXPECT_EQ(piece.slot, slots);
                        EXPECT_EQ(piece.length, parts[slots].length);
                        ++slots;
                        break;
                    case io::RangePiece::Kind::kBytes:
                        EXPECT_EQ(piece.bytes.size(), piece.length);
                        break;
                    case io::RangePiece::Kind::kDeferred:
                        ++deferred;
                        EXPECT_GE(piece.tail, 0);
                        break;
                }
            }
            EXPECT_EQ(at, task.end);
            EXPECT_EQ(slots, parts.size());
        }
        if (c.format == OutputFormat::kTorch) {
            EXPECT_GT(deferred, 0u) << "a torch zip's tail is CRC-dependent";
        } else {
            EXPECT_EQ(deferred, 0u);
        }
    }
}

TEST(TaskCopies, EachSlotPartIsOneCopyWithItsTensorsDtypesAndPlace) {
    for (OutputFormat format : {OutputFormat::kTorch, OutputFormat::kSafetensors}) {
        SCOPED_TRACE(std::string(enum_name(format)));
        Options options;
        options.format = format;
        options.dtype = DType::kBF16;  // a conversion: source and output dtypes differ
        options.max_shard_size.reset();
        options.block_size = 4096;
        const run::RunPlan plan =
            testing::build_plan(testing::fixture_meta("z2_ws2_frozen_bf16"), 2, options);
        std::size_t copies_seen = 0;
        for (const plan::WriteTask& task : plan.tasks) {
            const output::OutputFileLayout& layout = plan.files[task.file].layout;
            const std::vector<run::SlotPart> parts = run::slot_parts(plan, task);
            const std::vector<io::SlotCopy> copies = slot_copies(plan, task, parts, nullptr);
            ASSERT_EQ(copies.size(), parts.size());
            for (std::size_t i = 0; i < copies.size(); ++i) {
                const io::SlotCopy& copy = copies[i];
                const output::TensorSlot& slot = layout.slots[parts[i].slot];
                const plan::PlannedTensor& tensor = plan.tensors.tensors[slot.tensor];
                EXPECT_EQ(copy.offset, parts[i].offset);
                EXPECT_EQ(copy.length, parts[i].length);
                EXPECT_EQ(copy.extents.data(), parts[i].extents.data()) << "points into the part";
                EXPECT_EQ(copy.extents.size(), parts[i].extents.size());
                EXPECT_EQ(copy.source_dtype, plan.source_of(slot.tensor).source_dtype);
                EXPECT_EQ(copy.output_dtype, plan.source_of(slot.tensor).output_dtype);
                EXPECT_EQ(copy.name, tensor.name);
                EXPECT_EQ(copy.want_crc, format == OutputFormat::kTorch);
                EXPECT_TRUE(copy.check_ranges.empty()) << "no input check asked";
                ++copies_seen;
            }
        }
        EXPECT_GT(copies_seen, 0u);
    }
}

TEST(TaskCopies, ARankWritesItsUnskippedTasksSmallestFirst) {
    Options options;
    options.max_shard_size = 4096;  // several files on each rank
    run::RunPlan plan = testing::build_plan(testing::fixture_meta("z3_ws4_fp32"), 2, options);
    ASSERT_GT(plan.files.size(), 2u);
    plan.files[1].skip = true;  // complete from an earlier run
    std::size_t written = 0;
    for (std::uint32_t rank = 0; rank < 2; ++rank) {
        const std::vector<const plan::WriteTask*> mine = tasks_to_write(plan, rank);
        for (std::size_t i = 0; i < mine.size(); ++i) {
            EXPECT_EQ(mine[i]->rank, rank);
            EXPECT_NE(mine[i]->file, 1u) << "a skipped file is not written again";
            if (i > 0) {
                EXPECT_LE(mine[i - 1]->bytes, mine[i]->bytes);
            }
        }
        written += mine.size();
    }
    std::size_t unskipped = 0;
    for (const plan::WriteTask& task : plan.tasks)
        unskipped += plan.files[task.file].skip ? 0u : 1u;
    EXPECT_EQ(written, unskipped);
}

TEST(TaskRanges, ReadSpansCoverEveryReadOfTheRanksTasks) {
    Options options;
    options.max_shard_size.reset();
    options.block_size = 4096;  // both ranks get a part of the one file
    const run::RunPlan plan = testing::build_plan(testing::fixture_meta("z3_ws4_fp32"), 2, options);
    for (std::uint32_t rank = 0; rank < 2; ++rank) {
        const std::vector<const plan::WriteTask*> mine = tasks_to_write(plan, rank);
        const std::vector<io::ReadRange> spans = read_spans(plan, mine);
        std::size_t reads = 0;
        for (const plan::WriteTask* task : mine) {
            const std::vector<run::SlotPart> parts = run::slot_parts(plan, *task);
            const std::vector<io::SlotCopy> copies = slot_copies(plan, *task, parts, nullptr);
            for (const io::ReadRange& read : task_reads(copies)) {
                ++reads;
                if (read.length == 0)
                    continue;
                const bool covered = std::any_of(spans.begin(), spans.end(), [&](auto& span) {
                    return span.file == read.file && span.offset <= read.offset &&
                           read.offset + read.length <= span.offset + span.length;
                });
                EXPECT_TRUE(covered) << "file " << read.file << " offset " << read.offset;
            }
        }
        EXPECT_GT(reads, 0u);
        EXPECT_LE(spans.size(), reads);  // never more spans than reads
    }
}

}  // namespace
}  // namespace z2f::driver
