#include "parallel/mpi_start.hpp"

#include <array>
#include <cstdlib>

#include <mpi.h>

namespace z2f::parallel {

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
    if (!started_by_launcher()) {
        // The last argument 0: never override what the user set.
        ::setenv("OMPI_MCA_ess_singleton_isolated", "1", 0);
        ::setenv("OMPI_MCA_pml", "ob1", 0);
    }
    int provided = 0;
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
}

}  // namespace z2f::parallel
