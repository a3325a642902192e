// Starting MPI: the calls the executables make instead of MPI_Init and MPI_Finalize.
//
// Started without a launcher (`zero2fp32-mpi CKPT OUT`, the one-rank case), the converter does
// not start MPI at all: it is the only rank of its job, its communicator is this process alone
// (mpi/communicator.hpp), and only metadata would ever cross MPI. MPI_Init costs even an
// isolated singleton (below) 25-90 ms on the development machine (loading ~50 of OpenMPI's
// components; hwloc reading the node's topology and devices from /sys): a tenth of converting
// a 200M-parameter model from a warm page cache (docs/performance.md).
//
// A process that does call MPI_Init without a launcher (zero2fp32-synth, a program using the
// library) is what OpenMPI 4 calls a "singleton": it forks an `orted` daemon (for MPI_Comm_spawn,
// which we never call) and initialises every transport it finds, UCX included, although a single
// process talks to nobody. On the development machine that is 0.6 s of a 0.8 s start-up, as long as
// converting a 200M-parameter model. So, and only when no launcher's variables are present
// (mpirun/orted, PMIx as srun uses it, PMI-1/2, Hydra), we ask OpenMPI for an isolated singleton
// (`ess_singleton_isolated`) with the plain `ob1` messaging layer: 0.1 s. Settings the user
// already made (OMPI_MCA_* in the environment) win; other MPI libraries ignore these names.
//
// After MPI_Init, TCP_NODELAY is set on the TCP sockets MPI_Init opened: the PMIx client's
// connection to the node's server has Nagle's algorithm on, which costs every launched rank
// ~40 ms of delayed acknowledgement in MPI_Finalize (io/tcp_sockets.hpp).
//
// The thread level is MPI_THREAD_FUNNELED: the copy engine syncs outputs from a helper thread
// that never calls MPI.
#pragma once

namespace z2f::mpi {

// Whether the environment shows that an MPI launcher started this process.
bool started_by_launcher();

// MPI_Init_thread(FUNNELED), after the settings above (the singleton ones when no launcher
// started us), then TCP_NODELAY on the sockets it opened.
void start_mpi(int* argc, char*** argv);

// start_mpi() when a launcher started this process; otherwise nothing (this process alone).
void start_mpi_if_launched(int* argc, char*** argv);

// MPI_Finalize, when MPI was started and is not finalized yet.
void stop_mpi();

}  // namespace z2f::mpi
