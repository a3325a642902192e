#include "mpi/mpi_start.hpp"

#include <array>
#include <cstdlib>
#include <vector>

#include <mpi.h>

#include "io/tcp_sockets.hpp"

namespace z2f::mpi {

bool started_by_launcher() {
    // OpenMPI's mpirun/orted, PMIx (srun --mpi=pmix, prterun), PMI-1/2 (srun --mpi=pmi2,
    // MPICH's Hydra).
    constexpr std::array kLauncherVariables = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK",
                                               "PMI_FD", "PMI_SIZE"};
    for (const char* name : kLauncherVariables) {
        if (std::getenv(name) != nullptr) {
            return true;
        }
    }
    return false;
}

void start_mpi(int* argc, char*** argv) {
    // MPI_Init loads hwloc to learn the node's topology, and hwloc loads every plugin it finds:
    // the libxml2 XML backend (libxml2 and ICU, ~35 MB of libraries), OpenCL and GL
    // (X11) device discovery. None of them matters for moving bytes between files, and hwloc
    // keeps its own XML backend for topologies passed between processes. From a cold page
    // cache (a node's first run, or binaries on a parallel file system) they cost ~25 ms of
    // each rank's start (docs/performance.md).
    // The last argument 0, here and below: never override what the user set.
    ::setenv("HWLOC_PLUGINS_BLACKLIST", "hwloc_xml_libxml,hwloc_opencl,hwloc_gl", 0);
    // hwloc's I/O discovery (each PCI device's config space, then /sys/class for block, network
    // and other devices) serves only to place MPI's network traffic near a NIC, which metadata
    // does not need; in a VM each config-space read traps to the host. Launched ranks run it
    // in MPI_Init (2 ranks: ~20 ms of `mpiexec -n 2 zero2fp32-mpi --version`, 14 of 15 rounds
    // faster here), and nodes full of GPUs and NICs take longer. Cores and NUMA nodes are found
    // as before.
    ::setenv("HWLOC_COMPONENTS", "-pci,-linuxio", 0);
    // Our MPI traffic is metadata (kilobytes to a few MB per rank), so the plain point-to-point
    // layer is enough. Left to choose, OpenMPI probes its other layers first (UCX, and the
    // libfabric and PSM transports behind pml cm): ~0.2 s of every MPI_Init at 1-4 ranks here,
    // more than the rest of MPI's start-up. Every rank sets the same value, so they agree;
    // `mpirun --mca pml ...` or OMPI_MCA_pml in the environment still wins.
    ::setenv("OMPI_MCA_pml", "ob1", 0);
    if (!started_by_launcher()) {
        ::setenv("OMPI_MCA_ess_singleton_isolated", "1", 0);
    }
    const std::vector<int> sockets_before = io::tcp_socket_descriptors();
    int provided = 0;
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    // The PMIx client's connection to the node's server lacks TCP_NODELAY: 40 ms of delayed
    // acknowledgement in every launched rank's MPI_Finalize without this (io/tcp_sockets.hpp).
    (void)io::disable_nagle_on_new_tcp_sockets(sockets_before);
}

void start_mpi_if_launched(int* argc, char*** argv) {
    if (started_by_launcher())
        start_mpi(argc, argv);
}

void stop_mpi() {
    int initialized = 0;
    int finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized != 0 && finalized == 0)
        MPI_Finalize();
}

}  // namespace z2f::mpi
