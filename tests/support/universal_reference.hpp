// Reads the reference universal checkpoints (tests/data/universal, written by DeepSpeed's own
// ds_to_universal.py; see the README there) through our own torch-file reader.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/dtype.hpp"

namespace z2f::testing {

// <repo>/tests/data/universal and the fixture folders in it (z1_ws2_fp32, ...), sorted.
std::string universal_root();
std::vector<std::string> universal_fixtures();
// <root>/<fixture>/global_step2_universal
std::string universal_tag_dir(const std::string& fixture);

// The tensor- and pipeline-parallel fixtures that have a ds_to_universal.py reference, and
// their checkpoint folder and reference root (<fixture>/ref/universal, which holds
// latest_universal and global_step2_universal/, model-states copies included).
std::vector<std::string> parallel_universal_fixtures();
std::string parallel_fixture_dir(const std::string& fixture);
std::string parallel_universal_reference(const std::string& fixture);

// A universal tensor file: {'cat_dim': 0, 'param': T} (ZeRO-1/2) or T itself (ZeRO-3).
struct UniversalTensorFile {
    bool param_dict = false;
    // The dict's keys in order, each scalar value after '=' ("cat_dim=0", "vocab_tensor=True",
    // "param"); empty for a raw tensor.
    std::vector<std::string> entries;
    std::uint64_t storage_numel = 0;  // elements of T's storage (T may view only some)
    DType dtype = DType::kF32;
    std::vector<std::uint64_t> shape;
    bool requires_grad = false;
    std::vector<std::byte> bytes;  // T's data
};
UniversalTensorFile read_universal_tensor_file(const std::string& path);

// The parameter folders under <tag_dir>/zero, sorted.
std::vector<std::string> universal_param_folders(const std::string& tag_dir);

// Builds a complete universal folder in `dir`: the reference zero/ tree and latest_universal of
// `fixture`, plus the model-states files, which tests/data/universal omits because they are
// byte copies of tests/data/deepspeed/<fixture>/global_step2's.
void assemble_universal_checkpoint(const std::string& fixture, const std::string& dir);

}  // namespace z2f::testing
