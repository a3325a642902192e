#include "plan/ownership.hpp"

#include <algorithm>
#include <map>
#include <numeric>

#include <gtest/gtest.h>

namespace z2f {
namespace {

// A file of back-to-back slots of these byte sizes (1-byte elements), starting at `header`.
plan::FileWork file_of(std::vector<std::uint64_t> slot_bytes, std::uint64_t header = 0,
                       std::uint32_t item = 1) {
    plan::FileWork file;
    std::uint64_t offset = header;
    for (std::uint64_t bytes : slot_bytes) {
        file.slots.push_back({offset, bytes, item});
        offset += bytes;
    }
    file.size = offset;
    return file;
}

std::uint64_t tensor_bytes(const std::vector<plan::FileWork>& files) {
    std::uint64_t total = 0;
    for (const plan::FileWork& file : files)
        total += plan::slot_bytes_in_range(file, 0, file.size);
    return total;
}

// Tasks tile each file in order, start at block multiples, and their slot ranges, bytes and
// lead flags follow from their byte ranges.
void expect_tasks_tile_files(const std::vector<plan::FileWork>& files, const plan::Ownership& own,
                             std::uint64_t block) {
    std::map<std::uint32_t, std::uint64_t> next;  // file -> next expected byte
    std::map<std::uint32_t, int> leads;
    for (const plan::WriteTask& task : own.tasks) {
        const plan::FileWork& file = files.at(task.file);
        EXPECT_EQ(task.begin, next[task.file]) << "file " << task.file;
        EXPECT_LE(task.begin, task.end);
        EXPECT_EQ(task.begin % block, 0u);
        next[task.file] = task.end;
        leads[task.file] += task.lead ? 1 : 0;
        EXPECT_EQ(task.lead, task.begin == 0);
        auto [first, last] = plan::slots_in_range(file, task.begin, task.end);
        EXPECT_EQ(task.slot_begin, first);
        EXPECT_EQ(task.slot_end, last);
        EXPECT_EQ(task.bytes, plan::slot_bytes_in_range(file, task.begin, task.end));
        for (std::uint32_t s = first; s < last; ++s) {
            const plan::SlotWork& slot = file.slots[s];
            if (slot.offset < task.begin) {
                EXPECT_EQ((task.begin - slot.offset) % slot.item, 0u) << "splits an element";
            }
        }
    }
    for (std::uint32_t f = 0; f < files.size(); ++f) {
        EXPECT_EQ(next[f], files[f].size);
        EXPECT_EQ(leads[f], 1);
    }
    const std::uint64_t total = tensor_bytes(files);
    EXPECT_EQ(
        std::accumulate(own.bytes_per_rank.begin(), own.bytes_per_rank.end(), std::uint64_t{0}),
        total);
}

// Ranks write one stretch each, in file order, and none carries more than its share of the
// tensor bytes plus a block (every cut here falls on a clean multiple: 1-byte elements).
void expect_balanced_stretches(const std::vector<plan::FileWork>& files, const plan::Ownership& own,
                               std::uint32_t ranks, std::uint64_t block) {
    const std::uint64_t total = tensor_bytes(files);
    for (std::size_t t = 1; t < own.tasks.size(); ++t)
        EXPECT_LE(own.tasks[t - 1].rank, own.tasks[t].rank) << "task " << t;
    ASSERT_EQ(own.bytes_per_rank.size(), ranks);
    for (std::uint32_t r = 0; r < ranks; ++r)
        EXPECT_LE(own.bytes_per_rank[r], (total + ranks - 1) / ranks + block) << "rank " << r;
}

TEST(Ownership, MoreFilesThanRanksCutsAFileWhereAShareEnds) {
    std::vector<plan::FileWork> files = {file_of({5, 5}), file_of({9}), file_of({3}),
                                         file_of({2, 2}), file_of({6})};
    plan::Ownership own = plan::assign_ownership(files, 2, 1);
    expect_tasks_tile_files(files, own, 1);
    expect_balanced_stretches(files, own, 2, 1);
    // 32 bytes, shares of 16: file 0 (10) and 6 bytes of file 1 to rank 0, the rest to rank 1.
    EXPECT_EQ(own.bytes_per_rank, (std::vector<std::uint64_t>{16, 16}));
    ASSERT_EQ(own.tasks.size(), 6u);
    EXPECT_EQ(own.tasks[1].file, 1u);
    EXPECT_EQ(own.tasks[1].end, 6u);
    EXPECT_EQ(own.tasks[2].begin, 6u);
    EXPECT_EQ(own.tasks[2].rank, 1u);
    EXPECT_FALSE(own.tasks[2].lead);
}

TEST(Ownership, ABigShardNextToASmallOneIsShared) {
    // The bench's 1.5b model: a 4.94 GB shard and a 1.05 GB one (in MiB here), 2 ranks,
    // 4 MiB blocks. Whole files would give one rank 82 %.
    const std::uint64_t mib = 1 << 20;
    std::vector<plan::FileWork> files = {file_of({4714 * mib}, 4096, 4),
                                         file_of({1002 * mib}, 4096, 4)};
    plan::Ownership own = plan::assign_ownership(files, 2, 4 * mib);
    expect_tasks_tile_files(files, own, 4 * mib);
    expect_balanced_stretches(files, own, 2, 4 * mib);
    EXPECT_EQ(own.tasks_per_file[0], 2u);
    EXPECT_EQ(own.tasks_per_file[1], 1u);
    EXPECT_EQ(own.tasks.back().rank, 1u);
}

TEST(Ownership, ManyShardsOverFewerRanksStayWithinAShare) {
    // 100 shards of 5000 bytes over 64 ranks: whole files would give 36 ranks two shards.
    std::vector<plan::FileWork> files(100, file_of({5000}, 64, 1));
    plan::Ownership own = plan::assign_ownership(files, 64, 256);
    expect_tasks_tile_files(files, own, 256);
    expect_balanced_stretches(files, own, 64, 256);
    const std::uint64_t heaviest =
        *std::max_element(own.bytes_per_rank.begin(), own.bytes_per_rank.end());
    EXPECT_LT(heaviest, 2 * 5000u);
    EXPECT_EQ(std::count(own.bytes_per_rank.begin(), own.bytes_per_rank.end(), 0u), 0);
}

TEST(Ownership, AnUncuttableFileGoesToTheShareHoldingMoreOfIt) {
    // Blocks of 64: the 40-byte file cannot be cut. Shares of 50: the 40 bytes lie at 30..70,
    // 20 in rank 0's share and 20 in rank 1's; ties go to the earlier rank. At 60..100 (after
    // a 60-byte file) they are rank 1's.
    std::vector<plan::FileWork> files = {file_of({30}), file_of({40}), file_of({30})};
    plan::Ownership own = plan::assign_ownership(files, 2, 64);
    expect_tasks_tile_files(files, own, 64);
    EXPECT_EQ(own.bytes_per_rank, (std::vector<std::uint64_t>{70, 30}));
    files = {file_of({60}), file_of({40}), file_of({20})};
    own = plan::assign_ownership(files, 2, 64);
    EXPECT_EQ(own.bytes_per_rank, (std::vector<std::uint64_t>{60, 60}));
}

TEST(Ownership, OneBigFileIsSplitOverRanksAtBlockMultiples) {
    std::vector<plan::FileWork> files = {file_of({10, 10, 10, 10, 10, 10, 10, 10})};
    plan::Ownership own = plan::assign_ownership(files, 4, 4);
    expect_tasks_tile_files(files, own, 4);
    ASSERT_EQ(own.tasks.size(), 4u);
    EXPECT_EQ(own.tasks_per_file[0], 4u);
    // Midpoint 40, then 20 and 60: block multiples, so the four ranges are equal.
    for (auto bytes : own.bytes_per_rank)
        EXPECT_EQ(bytes, 20u);
    EXPECT_EQ(own.tasks[1].begin, 20u);
    // Slot 2 ([20, 30)) starts task 1; slot 1 ends task 0.
    EXPECT_EQ(own.tasks[0].slot_end, 2u);
    EXPECT_EQ(own.tasks[1].slot_begin, 2u);
}

TEST(Ownership, OneHugeTensorIsWrittenBySeveralRanks) {
    // A 4 MiB header-less tensor, 64 KiB blocks, 8 ranks: eight 512 KiB ranges.
    std::vector<plan::FileWork> files = {file_of({std::uint64_t{4} << 20}, 0, 4)};
    plan::Ownership own = plan::assign_ownership(files, 8, 64 << 10);
    expect_tasks_tile_files(files, own, 64 << 10);
    ASSERT_EQ(own.tasks.size(), 8u);
    for (const plan::WriteTask& task : own.tasks) {
        EXPECT_EQ(task.end - task.begin, std::uint64_t{512} << 10);
        EXPECT_EQ(task.slot_begin, 0u);
        EXPECT_EQ(task.slot_end, 1u);
    }
}

TEST(Ownership, ACutNeverSplitsAnElement) {
    // A 1-byte bool buffer leaves the 2-byte tensor after it at an odd offset: the block
    // multiple 16 lies at byte 15 of it (inside an element), so the cut moves to 32 or 0.
    plan::FileWork file;
    file.slots = {{0, 1, 1}, {1, 62, 2}};
    file.size = 63;
    std::vector<plan::FileWork> files = {file};
    plan::Ownership own = plan::assign_ownership(files, 2, 16);
    expect_tasks_tile_files(files, own, 16);
    ASSERT_EQ(own.tasks.size(), 1u);  // 16, 32, 48 are all odd bytes into the slot
    // With an even start every multiple is clean.
    file.slots = {{0, 2, 2}, {2, 62, 2}};
    file.size = 64;
    files = {file};
    own = plan::assign_ownership(files, 2, 16);
    expect_tasks_tile_files(files, own, 16);
    ASSERT_EQ(own.tasks.size(), 2u);
    EXPECT_EQ(own.tasks[1].begin, 32u);
}

TEST(Ownership, RangesOfFewerThanTwoBlocksAreNotCut) {
    std::vector<plan::FileWork> files = {file_of({100}), file_of({1})};
    plan::Ownership own = plan::assign_ownership(files, 8, 64);
    expect_tasks_tile_files(files, own, 64);
    EXPECT_EQ(own.tasks.size(), 3u);  // 100 bytes: one cut at 64, then nothing more
    own = plan::assign_ownership(files, 8, 128);
    EXPECT_EQ(own.tasks.size(), 2u);
}

TEST(Ownership, EmptyFilesAndZeroByteSlots) {
    plan::FileWork empty_slots;
    empty_slots.slots = {{8, 0, 4}, {8, 0, 4}, {8, 24, 4}, {32, 0, 4}};
    empty_slots.size = 40;
    std::vector<plan::FileWork> files = {file_of({}), empty_slots, file_of({7})};
    plan::Ownership own = plan::assign_ownership(files, 3, 8);
    expect_tasks_tile_files(files, own, 8);
    // Every empty slot lands in exactly one task.
    std::map<std::uint32_t, int> seen;
    for (const plan::WriteTask& task : own.tasks) {
        if (task.file != 1)
            continue;
        for (std::uint32_t s = task.slot_begin; s < task.slot_end; ++s) {
            if (empty_slots.slots[s].length == 0)
                ++seen[s];
        }
    }
    EXPECT_EQ(seen, (std::map<std::uint32_t, int>{{0, 1}, {1, 1}, {3, 1}}));
}

TEST(Ownership, AnEmptySlotAtTheFilesEndBelongsToTheLastRange) {
    plan::FileWork file;
    file.slots = {{0, 64, 4}, {64, 0, 4}};
    file.size = 64;
    EXPECT_EQ(plan::slots_in_range(file, 32, 64), (std::pair<std::uint32_t, std::uint32_t>{0, 2}));
    EXPECT_EQ(plan::slots_in_range(file, 0, 32), (std::pair<std::uint32_t, std::uint32_t>{0, 1}));
}

TEST(Ownership, IsDeterministicAndIndependentOfNothingButInputs) {
    std::vector<plan::FileWork> files;
    for (int f = 0; f < 37; ++f) {
        std::vector<std::uint64_t> sizes;
        for (int s = 0; s < 1 + f % 5; ++s)
            sizes.push_back(static_cast<std::uint64_t>((f * 7919 + s * 104729) % 1000) * 4);
        files.push_back(file_of(sizes, 64, 4));
    }
    for (std::uint32_t ranks : {1u, 2u, 3u, 4u, 64u, 1024u}) {
        plan::Ownership a = plan::assign_ownership(files, ranks, 256);
        plan::Ownership b = plan::assign_ownership(files, ranks, 256);
        expect_tasks_tile_files(files, a, 256);
        ASSERT_EQ(a.tasks.size(), b.tasks.size());
        for (std::size_t i = 0; i < a.tasks.size(); ++i) {
            EXPECT_EQ(a.tasks[i].rank, b.tasks[i].rank);
            EXPECT_EQ(a.tasks[i].end, b.tasks[i].end);
            EXPECT_LT(a.tasks[i].rank, ranks);
        }
        for (std::size_t t = 1; t < a.tasks.size(); ++t)
            EXPECT_LE(a.tasks[t - 1].rank, a.tasks[t].rank);
    }
}

}  // namespace
}  // namespace z2f
