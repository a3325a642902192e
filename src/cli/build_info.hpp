// What `zero2fp32-mpi --version` says about the build besides its version: the MPI library it
// was built with (the binary runs only with that MPI, or one ABI-compatible with it) and which
// optional dependencies are built in, each with what takes its place when it is not
// (cmake/Dependencies.cmake).
#pragma once

#include <string>

namespace z2f::cli {

// Lines "MPI: ...", "direct I/O engine: ...", "CRC-32: ...", "HDF5 output: ...", each ending
// in a newline.
std::string build_info();

}  // namespace z2f::cli
