// gtest under MPI: every rank runs the same tests in the same order (the tests call collective
// code), only rank 0 prints, and every rank exits non-zero when any rank saw a failure.
#include <gtest/gtest.h>
#include <mpi.h>

#include "parallel/mpi_start.hpp"

int main(int argc, char** argv) {
    // As the executables do (a singleton without a launcher): the mpi.singleton test runs it.
    z2f::parallel::start_mpi(&argc, &argv);
    ::testing::InitGoogleTest(&argc, argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank != 0) {
        ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
        delete listeners.Release(listeners.default_result_printer());
    }
    int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
    int any_failed = 0;
    MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return any_failed;
}
