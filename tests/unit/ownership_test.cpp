#include "plan/ownership.hpp"

#include <map>

#include <gtest/gtest.h>

namespace z2f {
namespace {

void expect_covers_every_slot_once(const std::vector<plan::FileWork>& files,
                                   const plan::Ownership& own) {
    std::map<std::uint32_t, std::uint32_t> next;  // file -> next expected slot
    std::map<std::uint32_t, int> leads;
    for (const plan::WriteTask& task : own.tasks) {
        EXPECT_EQ(task.slot_begin, next[task.file]) << "file " << task.file;
        EXPECT_LE(task.slot_begin, task.slot_end);
        next[task.file] = task.slot_end;
        leads[task.file] += task.lead ? 1 : 0;
        EXPECT_EQ(task.lead, task.slot_begin == 0);
    }
    for (std::uint32_t f = 0; f < files.size(); ++f) {
        EXPECT_EQ(next[f], files[f].slot_bytes.size());
        EXPECT_EQ(leads[f], 1);
    }
}

TEST(Ownership, MoreFilesThanRanksBalancesWholeFiles) {
    std::vector<plan::FileWork> files = {{{5, 5}}, {{9}}, {{3}}, {{2, 2}}, {{6}}};
    plan::Ownership own = plan::assign_ownership(files, 2);
    expect_covers_every_slot_once(files, own);
    EXPECT_EQ(own.tasks.size(), 5u);  // no split needed
    // LPT: 10 -> r0, 9 -> r1, 6 -> r1 (15), 4 -> r0 (14), 3 -> r0 (17)
    EXPECT_EQ(own.bytes_per_rank, (std::vector<std::uint64_t>{17, 15}));
}

TEST(Ownership, OneBigFileIsSplitOverRanks) {
    std::vector<plan::FileWork> files = {{{10, 10, 10, 10, 10, 10, 10, 10}}};
    plan::Ownership own = plan::assign_ownership(files, 4);
    expect_covers_every_slot_once(files, own);
    ASSERT_EQ(own.tasks.size(), 4u);
    EXPECT_EQ(own.tasks_per_file[0], 4u);
    for (auto bytes : own.bytes_per_rank)
        EXPECT_EQ(bytes, 20u);
}

TEST(Ownership, SingleTensorsCannotBeSplit) {
    std::vector<plan::FileWork> files = {{{100}}, {{1}}};
    plan::Ownership own = plan::assign_ownership(files, 8);
    expect_covers_every_slot_once(files, own);
    EXPECT_EQ(own.tasks.size(), 2u);
}

TEST(Ownership, EmptyFilesAndZeroByteSlots) {
    std::vector<plan::FileWork> files = {{{}}, {{0, 0}}, {{7}}};
    plan::Ownership own = plan::assign_ownership(files, 3);
    expect_covers_every_slot_once(files, own);
}

TEST(Ownership, IsDeterministicAndIndependentOfNothingButInputs) {
    std::vector<plan::FileWork> files;
    for (int f = 0; f < 37; ++f) {
        plan::FileWork work;
        for (int s = 0; s < 1 + f % 5; ++s)
            work.slot_bytes.push_back(static_cast<std::uint64_t>((f * 7919 + s * 104729) % 1000));
        files.push_back(work);
    }
    for (std::uint32_t ranks : {1u, 2u, 3u, 4u, 64u, 1024u}) {
        plan::Ownership a = plan::assign_ownership(files, ranks);
        plan::Ownership b = plan::assign_ownership(files, ranks);
        expect_covers_every_slot_once(files, a);
        ASSERT_EQ(a.tasks.size(), b.tasks.size());
        for (std::size_t i = 0; i < a.tasks.size(); ++i) {
            EXPECT_EQ(a.tasks[i].rank, b.tasks[i].rank);
            EXPECT_EQ(a.tasks[i].slot_end, b.tasks[i].slot_end);
            EXPECT_LT(a.tasks[i].rank, ranks);
        }
    }
}

}  // namespace
}  // namespace z2f
