// The input CRC check plan (run/input_check.hpp), built without MPI from the real fixtures:
// the pieces of every record read cover it exactly once and in file order, every byte a copy
// reads is checksummed by the rank that copies it, and the pieces' CRCs, computed here from the
// fixture files, join into the CRCs of the zip directories.
#include "run/input_check.hpp"

#include <algorithm>
#include <set>

#include <gtest/gtest.h>

#include "checkpoint/assemble.hpp"
#include "checkpoint/discovery.hpp"
#include "checkpoint/file_grid.hpp"
#include "checkpoint/parallel_assemble.hpp"
#include "common/crc32.hpp"
#include "io/posix_file.hpp"
#include "run/task_parts.hpp"
#include "run/tensor_source.hpp"
#include "support/built_formats.hpp"
#include "support/fixture_plans.hpp"
#include "support/test_files.hpp"
#include "zero2fp32/error.hpp"

namespace z2f::run {
namespace {

using testing::fixture_meta;

RunPlan build(const checkpoint::CheckpointMeta& meta, std::uint32_t ranks, Options options = {}) {
    return testing::build_plan(meta, ranks, options);
}

// Every piece's CRC, read from the input files as a rank would.
std::vector<std::uint32_t> piece_crcs(const RunPlan& plan, const InputCheckPlan& check) {
    std::vector<std::uint32_t> crcs;
    for (const CheckPiece& piece : check.pieces) {
        const InputRecord& record = plan.tensors.records.at(piece.record);
        io::File file = io::File::open_read(plan.tensors.inputs.at(record.file).path);
        std::vector<std::byte> bytes(piece.length);
        file.read_exact(piece.offset, bytes);
        crcs.push_back(crc32_of(bytes));
    }
    return crcs;
}

void expect_well_formed(const RunPlan& plan, const InputCheckPlan& check) {
    ASSERT_FALSE(check.records.empty());
    std::uint32_t next_piece = 0;
    for (const CheckedRecord& checked : check.records) {
        const InputRecord& record = plan.tensors.records.at(checked.record);
        EXPECT_NE(record.crc32, 0u);
        EXPECT_EQ(checked.first_piece, next_piece);
        ASSERT_GE(checked.piece_count, 1u);
        std::uint64_t position = record.offset;
        for (std::uint32_t p = checked.first_piece; p < checked.first_piece + checked.piece_count;
             ++p) {
            const CheckPiece& piece = check.pieces.at(p);
            EXPECT_EQ(piece.record, checked.record);
            EXPECT_EQ(piece.offset, position) << record.name;
            EXPECT_GT(piece.length, 0u);
            EXPECT_LT(piece.rank, plan.ranks);
            position = piece.offset + piece.length;
        }
        EXPECT_EQ(position, record.end()) << record.name;
        next_piece += checked.piece_count;
        EXPECT_FALSE(checked.tensors.empty());
        EXPECT_FALSE(checked.files.empty());
    }
    EXPECT_EQ(next_piece, check.pieces.size());

    // Ranges: inside their slot's extent, exactly their piece, read by the piece's rank; every
    // piece a copy reads is read by one slot only.
    std::vector<int> read_by(check.pieces.size(), 0);
    for (const auto& [key, ranges] : check.slot_ranges) {
        const plan::WriteTask& task = plan.tasks.at(key >> 32);
        const auto slot = static_cast<std::uint32_t>(key & 0xffffffffu);
        ASSERT_TRUE(task.slot_begin <= slot && slot < task.slot_end);
        const std::vector<SlotPart> parts = slot_parts(plan, task);
        const SlotPart& part = parts.at(slot - task.slot_begin);
        ASSERT_EQ(part.slot, slot);
        const std::uint32_t rank = task.rank;
        for (const CrcRange& range : ranges) {
            // The range's extents follow one another in the file, and the range holds the
            // first from its offset, the middle ones whole and the last up to its end.
            ASSERT_GE(range.extents, 1u);
            ASSERT_GE(range.stride, 1u);
            const SourceExtent& first = part.extents.at(range.extent);
            const SourceExtent& last = part.extents.at(range.last_extent());
            EXPECT_GE(range.offset, first.offset);
            EXPECT_LT(range.offset, first.offset + first.length);
            EXPECT_GT(range.offset + range.length, last.offset);
            EXPECT_LE(range.offset + range.length, last.offset + last.length);
            for (std::uint32_t k = 1; k < range.extents; ++k) {
                const SourceExtent& before = part.extents.at(range.extent + (k - 1) * range.stride);
                const SourceExtent& after = part.extents.at(range.extent + k * range.stride);
                EXPECT_EQ(after.file, before.file);
                EXPECT_EQ(after.offset, before.offset + before.length);
            }
            const CheckPiece& piece = check.pieces.at(range.piece);
            EXPECT_FALSE(piece.extra_read);
            EXPECT_EQ(piece.offset, range.offset);
            EXPECT_EQ(piece.length, range.length);
            EXPECT_EQ(piece.rank, rank);
            ++read_by[range.piece];
        }
    }
    for (std::size_t p = 0; p < check.pieces.size(); ++p)
        EXPECT_EQ(read_by[p], check.pieces[p].extra_read ? 0 : 1) << "piece " << p;
}

TEST(InputCheck, PiecesCoverEveryRecordReadOnceAndJoinToItsCrc) {
    for (const char* fixture :
         {"z3_ws2_tied_fp32", "z2_ws2_frozen_bf16", "z1_ws2_bf16opt", "z3_ws4_fp32"}) {
        checkpoint::CheckpointMeta meta = fixture_meta(fixture);
        for (OutputFormat format : testing::built_formats()) {
            for (std::uint32_t ranks = 1; ranks <= 4; ++ranks) {
                for (std::uint64_t block : {std::uint64_t{4} << 20, std::uint64_t{4096}}) {
                    SCOPED_TRACE(std::string(fixture) + " " + std::string(enum_name(format)) +
                                 " ranks " + std::to_string(ranks) + " block " +
                                 std::to_string(block));
                    Options options;
                    options.format = format;
                    options.block_size = block;  // 4096: slots cut between ranks
                    if (format == OutputFormat::kUniversal || block == 4096)
                        options.max_shard_size.reset();
                    else
                        options.max_shard_size = 3'000;
                    RunPlan plan = build(meta, ranks, options);
                    InputCheckPlan check = plan_input_check(plan);
                    expect_well_formed(plan, check);
                    EXPECT_TRUE(check.without_crc.empty());
                    std::vector<std::uint32_t> crcs = piece_crcs(plan, check);
                    EXPECT_TRUE(failed_records(check, plan.tensors.records, crcs).empty());
                }
            }
        }
    }
}

TEST(InputCheck, AShardsRowsOfARowParallelWeightAreOneRange) {
    // TP=2: the output rows of a row-parallel weight alternate between the ranks' shards, one
    // extent per row and shard. A shard's rows follow one another in its file, so each is one
    // range over every other extent (and one piece), not one per row; the pieces still join.
    const std::string dir = std::string(Z2F_TEST_DATA) + "/deepspeed-parallel/tp2_dp2_z1_fp32";
    checkpoint::ParallelCheckpointMeta meta =
        checkpoint::read_parallel_checkpoint_meta(checkpoint::discover_file_grid(dir, ""));
    for (OutputFormat format : testing::built_formats()) {
        for (std::uint32_t ranks = 1; ranks <= 4; ++ranks) {
            for (std::uint64_t block : {std::uint64_t{4} << 20, std::uint64_t{4096}}) {
                SCOPED_TRACE(std::string(enum_name(format)) + " ranks " + std::to_string(ranks) +
                             " block " + std::to_string(block));
                Options options;
                options.format = format;
                options.block_size = block;
                options.max_shard_size.reset();
                RunSettings settings;
                settings.options = options;
                settings.ranks = ranks;
                settings.writer_version = "test";
                RunPlan plan =
                    build_run_plan(parallel_source(meta, options, std::nullopt), settings);
                InputCheckPlan check = plan_input_check(plan);
                expect_well_formed(plan, check);
                EXPECT_TRUE(
                    failed_records(check, plan.tensors.records, piece_crcs(plan, check)).empty());
                // dense_4h_to_h.weight: 16 rows x 2 shards; a ZeRO-1 partition boundary cuts
                // a row, so a shard's rows are one or two ranges.
                std::size_t extents = 0;
                std::size_t ranges = 0;
                std::uint32_t longest = 0;
                for (std::uint32_t t = 0; t < plan.tasks.size(); ++t) {
                    for (const SlotPart& part : slot_parts(plan, plan.tasks[t])) {
                        const output::OutputFileLayout& layout =
                            plan.files.at(plan.tasks[t].file).layout;
                        const std::string& name =
                            plan.tensors.tensors.at(layout.slots.at(part.slot).tensor).name;
                        if (name.find("0.mlp.dense_4h_to_h.weight") == std::string::npos)
                            continue;
                        extents += part.extents.size();
                        if (const auto* slot = check.ranges_of(t, part.slot)) {
                            ranges += slot->size();
                            for (const CrcRange& range : *slot) {
                                longest = std::max(longest, range.extents);
                                if (range.extents > 1) {
                                    EXPECT_GE(range.stride, 2u);  // 3 by a cut row
                                }
                            }
                        }
                    }
                }
                if (format == OutputFormat::kUniversal)
                    continue;  // written per TP rank there
                EXPECT_GE(extents, 32u);
                EXPECT_LE(ranges, 8u);
                EXPECT_GE(longest, 7u);
            }
        }
    }
}

TEST(InputCheck, TheSamePlanOnEveryRankForEveryRankCount) {
    checkpoint::CheckpointMeta meta = fixture_meta("z3_ws4_fp32");
    for (std::uint32_t ranks = 1; ranks <= 4; ++ranks) {
        InputCheckPlan a = plan_input_check(build(meta, ranks));
        InputCheckPlan b = plan_input_check(build(meta, ranks));
        EXPECT_EQ(a.pieces, b.pieces);
        EXPECT_EQ(a.slot_ranges, b.slot_ranges);
    }
}

TEST(InputCheck, BytesNoCopyReadsAreExtraReadsOfTheChecker) {
    // One tensor of a ZeRO-2 flat group: the rest of the group's record is read for the check.
    checkpoint::CheckpointMeta meta = fixture_meta("z2_ws2_fp32");
    Options options;
    options.include = {"^fc1\\.bias$"};
    RunPlan plan = build(meta, 2, options);
    ASSERT_EQ(plan.tensors.tensors.size(), 1u);
    InputCheckPlan check = plan_input_check(plan);
    expect_well_formed(plan, check);
    std::uint64_t record_bytes = 0;
    for (const CheckedRecord& checked : check.records)
        record_bytes += plan.tensors.records[checked.record].length;
    EXPECT_EQ(check.extra_bytes() + plan.tensors.tensors[0].source_bytes(), record_bytes);
    for (const CheckPiece& piece : check.pieces)
        EXPECT_EQ(piece.rank, plan.tasks.front().rank);
}

TEST(InputCheck, SkippedFilesReadNothingAndRecordsWithoutCrcAreListed) {
    checkpoint::CheckpointMeta meta = fixture_meta("z3_ws2_fp32");
    Options options;
    options.max_shard_size = 3'000;
    RunPlan plan = build(meta, 2, options);
    ASSERT_GE(plan.files.size(), 2u);
    plan.apply_resume(std::vector<bool>(plan.files.size(), true));
    InputCheckPlan none = plan_input_check(plan);
    EXPECT_TRUE(none.records.empty());
    EXPECT_TRUE(none.pieces.empty());

    for (InputRecord& record : meta.records)
        record.crc32 = 0;
    RunPlan without = build(meta, 2, options);
    InputCheckPlan check = plan_input_check(without);
    EXPECT_TRUE(check.records.empty());
    EXPECT_TRUE(check.slot_ranges.empty());
    EXPECT_FALSE(check.without_crc.empty());
    EXPECT_FALSE(unchecked_records_warning(plan, none).has_value());
    std::optional<std::string> warning = unchecked_records_warning(without, check);
    ASSERT_TRUE(warning.has_value());
    EXPECT_EQ(warning->rfind(
                  std::to_string(check.without_crc.size()) + " input record(s) carry no CRC-32", 0),
              0u)
        << *warning;
    EXPECT_NE(
        warning->find(
            without.tensors.inputs.at(without.tensors.records.at(check.without_crc[0]).file).path),
        std::string::npos)
        << *warning;

    // Legacy-format files have no CRCs at all: the plan says that once, this warning does not.
    for (InputRecord& record : meta.records)
        record.format_has_no_crc = true;
    RunPlan legacy = build(meta, 2, options);
    EXPECT_FALSE(unchecked_records_warning(legacy, plan_input_check(legacy)).has_value());
}

TEST(InputCheck, AFailedRecordNamesTheFileTheRecordAndItsTensors) {
    checkpoint::CheckpointMeta meta = fixture_meta("z3_ws2_fp32");
    RunPlan plan = build(meta, 3);
    InputCheckPlan check = plan_input_check(plan);
    std::vector<std::uint32_t> crcs = piece_crcs(plan, check);
    crcs.back() ^= 1;
    std::vector<FailedRecord> failed = failed_records(check, plan.tensors.records, crcs);
    ASSERT_EQ(failed.size(), 1u);
    const InputRecord& record = plan.tensors.records[failed[0].record];
    EXPECT_EQ(failed[0].expected, record.crc32);
    EXPECT_NE(failed[0].actual, record.crc32);
    std::string message = describe_failed_records(plan, check, failed);
    EXPECT_NE(message.find(plan.tensors.inputs[record.file].path), std::string::npos) << message;
    EXPECT_NE(message.find("record '" + record.name + "'"), std::string::npos) << message;
    EXPECT_NE(message.find("fails its CRC-32 check"), std::string::npos) << message;
    const std::string first_tensor =
        plan.tensors.tensors[check.records[failed[0].checked].tensors[0]].name;
    EXPECT_NE(message.find("'" + first_tensor + "'"), std::string::npos) << message;
    EXPECT_THROW(failed_records(check, plan.tensors.records, {}), Error);
}

}  // namespace
}  // namespace z2f::run
