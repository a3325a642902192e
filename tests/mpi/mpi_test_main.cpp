// gtest under MPI: every rank runs the same tests in the same order (the tests call collective
// code), only rank 0 prints, and every rank exits non-zero when any rank saw a failure.
#include <cstdint>
#include <cstdlib>
#include <filesystem>

#include <gtest/gtest.h>
#include <mpi.h>

#include "mpi/communicator.hpp"
#include "mpi/mpi_start.hpp"

int main(int argc, char** argv) {
    // As the converter does: without a launcher (the mpi.alone test) MPI is not started and
    // every collective runs in this process alone.
    z2f::mpi::start_mpi_if_launched(&argc, &argv);
    ::testing::InitGoogleTest(&argc, argv);
    const z2f::mpi::Communicator world(MPI_COMM_WORLD);
    // A named output folder (Z2F_MPI_OUTPUT_DIR, compared across rank counts and launchers) holds
    // this run's outputs only: what an earlier build's tests left there is removed first.
    if (const char* outputs = std::getenv("Z2F_MPI_OUTPUT_DIR");
        outputs != nullptr && world.is_root())
        std::filesystem::remove_all(outputs);
    world.barrier();
    if (!world.is_root()) {
        ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
        delete listeners.Release(listeners.default_result_printer());
    }
    const std::uint64_t failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
    const std::uint64_t any_failed = world.max(failed);
    z2f::mpi::stop_mpi();
    return static_cast<int>(any_failed);
}
