// What start_mpi() leaves behind, on every rank (main() started MPI through it).
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>
#include <mpi.h>
#include <sys/socket.h>

#include "io/tcp_sockets.hpp"

namespace {

bool connected(int descriptor) {
    sockaddr_storage peer{};
    socklen_t length = sizeof peer;
    return ::getpeername(descriptor, reinterpret_cast<sockaddr*>(&peer), &length) == 0;
}

// A launched rank's connection to the PMIx server, and MPI's own TCP connections: none may
// wait for delayed acknowledgements (io/tcp_sockets.hpp). Sockets that are not connected are
// left out: under srun a rank inherits a listening socket from slurmstepd, which start_mpi()
// rightly leaves alone. Under mpi.alone MPI is not started and there is no TCP socket at all.
TEST(MpiStart, EveryConnectedTcpSocketOfTheRankHasNoDelay) {
    for (const int descriptor : z2f::io::tcp_socket_descriptors()) {
        if (connected(descriptor)) {
            EXPECT_TRUE(z2f::io::tcp_nodelay(descriptor)) << "TCP socket " << descriptor;
        }
    }
}

// What start_mpi() asks of OpenMPI and hwloc before MPI_Init (the test environment sets none of
// these itself). Under mpi.alone MPI is not started and nothing is asked.
TEST(MpiStart, AsksForTheShortStartUp) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized == 0)
        GTEST_SKIP() << "MPI not started (no launcher)";
    auto value = [](const char* name) {
        const char* text = std::getenv(name);
        return std::string(text == nullptr ? "(unset)" : text);
    };
    EXPECT_EQ(value("OMPI_MCA_pml"), "ob1");
    EXPECT_EQ(value("HWLOC_COMPONENTS"), "-pci,-linuxio");
    EXPECT_EQ(value("HWLOC_PLUGINS_BLACKLIST"), "hwloc_xml_libxml,hwloc_opencl,hwloc_gl");
}

}  // namespace
