// A process that never started MPI (the converter without a launcher) is a communicator of one
// rank: every collective returns at once and no MPI function but MPI_Initialized is called. The
// unit tests never start MPI, so they check exactly that case.
#include <gtest/gtest.h>
#include <mpi.h>

#include "mpi/communicator.hpp"
#include "mpi/peer_channel.hpp"

namespace z2f::mpi {
namespace {

bool mpi_initialized() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    return initialized != 0;
}

std::vector<std::byte> bytes_of(std::initializer_list<int> values) {
    std::vector<std::byte> out;
    for (int value : values)
        out.push_back(static_cast<std::byte>(value));
    return out;
}

TEST(CommunicatorAlone, IsRankZeroOfOne) {
    ASSERT_FALSE(mpi_initialized());
    const Communicator world(MPI_COMM_WORLD);
    EXPECT_EQ(world.rank(), 0);
    EXPECT_EQ(world.size(), 1);
    EXPECT_TRUE(world.is_root());
    EXPECT_TRUE(world.alone());
}

TEST(CommunicatorAlone, CollectivesReturnThisProcesssOwnValues) {
    const Communicator world(MPI_COMM_WORLD);
    const std::vector<std::byte> mine = bytes_of({1, 2, 3});
    EXPECT_EQ(world.broadcast(mine), mine);
    const std::vector<std::vector<std::byte>> all = world.all_gather(mine);
    ASSERT_EQ(all.size(), 1u);
    EXPECT_EQ(all[0], mine);
    EXPECT_EQ(world.all_gather({}), std::vector<std::vector<std::byte>>(1));
    EXPECT_EQ(world.sum(41), 41u);
    EXPECT_EQ(world.max(7), 7u);
    world.barrier();
    int polls = 0;
    world.quiet_barrier([&] { ++polls; });
    EXPECT_EQ(polls, 0);  // nobody to wait for
    EXPECT_FALSE(mpi_initialized());
}

TEST(CommunicatorAlone, PeerChannelHasNoPeers) {
    const Communicator world(MPI_COMM_WORLD);
    PeerChannel channel(world);
    channel.report_progress(10, true);
    EXPECT_EQ(channel.total_progress(25), 25u);
    channel.announce_failure();
    EXPECT_FALSE(channel.peer_failed());
    channel.drain();
    EXPECT_FALSE(mpi_initialized());
}

}  // namespace
}  // namespace z2f::mpi
