// Reading converted outputs back for tests: safetensors files (through the strict header
// parser) into name/dtype/shape/bytes, and directory comparisons.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "support/expected_state.hpp"

namespace z2f::testing {

struct SafetensorsContent {
    std::vector<std::pair<std::string, std::string>> metadata;
    std::vector<ExpectedTensor> tensors;  // in data-offset order
};

SafetensorsContent read_safetensors(const std::string& path);

// One dataset of an HDF5 file: raw bytes in the file's type, shape, and its "dtype" attribute
// ("" when absent). Hard links resolve to their target. A build without HDF5 has no reader: it
// throws (callers ask output::hdf5_output_built_in() first).
struct Hdf5Dataset {
    std::vector<std::uint64_t> shape;
    std::vector<std::byte> bytes;
    std::string dtype_attribute;
    std::size_t element_size = 0;
};
Hdf5Dataset read_hdf5_dataset(const std::string& path, const std::string& name);

// Regular files of a directory tree, relative names, sorted; the run record a conversion leaves
// beside its outputs (.zero2fp32-run.json, which references never have) is left out.
std::vector<std::string> list_tree(const std::string& root);

// Empty when both trees hold the same files with the same bytes; else what differs.
std::string compare_trees(const std::string& a, const std::string& b);

}  // namespace z2f::testing
