// The conversion entry point: runs every phase (discover, metadata, plan, execute, agree,
// index) on the ranks of `comm` and returns the process exit code agreed by all of them.
// Collective: every rank of `comm` must call it with the same options. Never throws.
#pragma once

#include <mpi.h>

#include "zero2fp32/error.hpp"
#include "zero2fp32/options.hpp"

namespace z2f {

ExitCode run_conversion(const ConvertOptions& options, MPI_Comm comm);

}  // namespace z2f
