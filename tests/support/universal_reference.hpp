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

// A universal tensor file: {'cat_dim': 0, 'param': T} (ZeRO-1/2) or T itself (ZeRO-3).
struct UniversalTensorFile {
    bool param_dict = false;
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
