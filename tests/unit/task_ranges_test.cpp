// What a task hands to the copy engine (driver/execute/task_ranges.hpp), without any I/O: the
// pieces of every task tile its byte range in file order with the right kinds, and the read spans
// of a rank's tasks cover every byte its copies read.
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
