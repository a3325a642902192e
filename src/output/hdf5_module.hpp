// The HDF5 writer, loaded on first use.
//
// HDF5 and the libraries it needs (the Debian build brings libcurl, GnuTLS, Kerberos, LDAP and
// OpenSSL along: 33 libraries, 24 MB) are linked into a module of their own,
// libzero2fp32_hdf5.so, next to libzero2fp32.so. A conversion to safetensors, torch or
// universal output never maps them: on a cold page cache (a node's first run, or binaries on a
// parallel file system) that is ~30 ms less start-up on every rank. `--format hdf5` loads the
// module from the directory libzero2fp32.so was loaded from, once per process.
//
// The module's one entry point is the C symbol kHdf5ModuleEntry, a function returning
// layout_hdf5_file (hdf5_layout.hpp); module and library are always built together, so the
// C++ types passed across are the same.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "output/hdf5_layout.hpp"

namespace z2f::output {

using Hdf5LayoutFunction = OutputFileLayout (*)(std::string file_name, const plan::TensorPlan& plan,
                                                std::span<const std::uint32_t> tensor_indices,
                                                const Hdf5LayoutOptions& options);
using Hdf5ModuleEntry = Hdf5LayoutFunction (*)();

inline constexpr const char* kHdf5ModuleEntry = "z2f_hdf5_layout_v1";
inline constexpr const char* kHdf5ModuleName = "libzero2fp32_hdf5.so";

// layout_hdf5_file from the module, loading it on the first call (thread-safe). Throws
// z2f::Error (kOutput) naming the module's path and the loader's message when it cannot be
// loaded, on every call; in a build configured without HDF5 (no module), Error (kUsage) naming
// the build option that enables it.
Hdf5LayoutFunction hdf5_layout_function();

// Whether this build has the HDF5 module (HDF5 found at configure time).
bool hdf5_output_built_in() noexcept;

}  // namespace z2f::output
