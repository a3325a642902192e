// The in-memory reader's threads (driver/thread_team.hpp): every share runs; one share's error
// stops the others and is the one reported; the caller giving up stops every share and is an
// interruption.
#include "driver/thread_team.hpp"

#include <atomic>
#include <stdexcept>

#include <gtest/gtest.h>

#include "zero2fp32/error.hpp"

namespace z2f::driver {
namespace {

TEST(ThreadTeam, EveryShareRuns) {
    std::atomic<unsigned> ran{0};
    std::atomic<unsigned> indices{0};
    run_team(4,
             [&](unsigned index, const StopFlag&) {
                 ran += 1;
                 indices += 1U << index;
             },
             {});
    EXPECT_EQ(ran.load(), 4U);
    EXPECT_EQ(indices.load(), 0b1111U);
}

TEST(ThreadTeam, AShareErrorStopsTheOthersAndIsRethrown) {
    std::atomic<unsigned> stopped{0};
    try {
        run_team(3,
                 [&](unsigned index, const StopFlag& stop) {
                     if (index == 1)
                         throw Error(ErrorKind::kIo, "share 1 failed");
                     try {
                         for (;;)  // ends only when stopped
                             stop.check();
                     } catch (...) {
                         stopped += 1;
                         throw;
                     }
                 },
                 {});
        FAIL() << "no error";
    } catch (const Error& error) {
        EXPECT_EQ(error.kind(), ErrorKind::kIo);
        EXPECT_STREQ(error.what(), "share 1 failed");
    }
    EXPECT_EQ(stopped.load(), 2U);
}

TEST(ThreadTeam, GivingUpInterrupts) {
    int polls = 0;
    try {
        run_team(
            2,
            [](unsigned, const StopFlag& stop) {
                for (;;)
                    stop.check();
            },
            [&] { return ++polls < 2; });
        FAIL() << "not interrupted";
    } catch (const Error& error) {
        EXPECT_EQ(error.kind(), ErrorKind::kInterrupted);
    }
    EXPECT_EQ(polls, 2);
}

TEST(ThreadTeam, AnExceptionOfKeepGoingIsRethrown) {
    EXPECT_THROW(run_team(
                     1,
                     [](unsigned, const StopFlag& stop) {
                         for (;;)
                             stop.check();
                     },
                     []() -> bool { throw std::runtime_error("poll failed"); }),
                 std::runtime_error);
}

}  // namespace
}  // namespace z2f::driver
