// zero2fp32-inspect's view of an HDF5 file such as the converter writes (output/hdf5_layout.hpp):
// the root group's string attributes, then one line per tensor in state-dict order (the
// `__names__` dataset; for other files, the root group's datasets by name) with its dtype in
// safetensors' spelling, its shape, and where its bytes are in the file. A tied alias, a hard
// link to its owner's dataset, is shown as such. Reads metadata only, through the HDF5 library.
#pragma once

#include <ostream>
#include <string>

namespace z2f::tools {

// Whether the file starts with HDF5's signature ("\x89HDF\r\n\x1a\n"), at offset 0 (the only
// place the converter puts it).
bool looks_like_hdf5(const std::string& path);

// Prints the file as above. Throws z2f::Error (kInput) naming the file when HDF5 cannot read it,
// and Error (kUsage) in a build without HDF5, naming the option that enables it.
void print_hdf5(std::ostream& out, const std::string& path);

}  // namespace z2f::tools
