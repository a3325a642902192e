// The Hugging Face output formats this build writes: safetensors and torch always, HDF5 when it
// was configured with HDF5 (cmake/Dependencies.cmake). Tests loop over these; a build without
// HDF5 checks its refusal instead (tests/mpi/conversion_test.cpp).
#pragma once

#include <vector>

#include "output/hdf5_module.hpp"
#include "zero2fp32/options.hpp"

namespace z2f::testing {

inline std::vector<OutputFormat> built_hf_formats() {
    std::vector<OutputFormat> formats = {OutputFormat::kSafetensors, OutputFormat::kTorch};
    if (output::hdf5_output_built_in())
        formats.push_back(OutputFormat::kHdf5);
    return formats;
}

// built_hf_formats() and the universal checkpoint.
inline std::vector<OutputFormat> built_formats() {
    std::vector<OutputFormat> formats = built_hf_formats();
    formats.push_back(OutputFormat::kUniversal);
    return formats;
}

}  // namespace z2f::testing
