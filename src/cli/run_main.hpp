// The command line of zero2fp32-mpi as a function, for the two programs that run it: the
// zero2fp32-mpi executable (main.cpp), one rank of an MPI job or the job's only process, and
// the Python package's `python -m zero2fp32`, which runs it inside the interpreter's process,
// alone: it never starts MPI, and where the host process started MPI (mpi4py) it converts on
// MPI_COMM_SELF.
#pragma once

#include <cstdint>

namespace z2f::cli {

enum class MpiUse : std::uint8_t {
    kIfLaunched,  // start MPI when a launcher started the process; every rank converts together
    kNever,       // this process alone
};

// Prints, writes the summary file, and returns the exit code (README.md, "Exit codes").
int run_main(int argc, char** argv, MpiUse mpi);

}  // namespace z2f::cli
