// Reads the ground truth of a bundled fixture: expected.pt is a torch.save'd
// {"state_dict": OrderedDict[name -> tensor], "meta": dict}, read through our own reader.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/dtype.hpp"

namespace z2f::testing {

struct ExpectedTensor {
    std::string name;
    DType dtype = DType::kF32;
    std::vector<std::uint64_t> shape;
    std::vector<std::byte> bytes;
};

// The state dict of an expected*.pt file, in its own (model.state_dict()) order.
std::vector<ExpectedTensor> read_expected_state_dict(const std::string& path);
// The state dict saved by torch.save(dict) (e.g. zero_to_fp32's pytorch_model.bin), in order.
std::vector<ExpectedTensor> read_torch_state_dict(const std::string& path);
const ExpectedTensor* find_tensor(const std::vector<ExpectedTensor>& tensors,
                                  const std::string& name);

// Reads `length` bytes at `offset` of a file.
std::vector<std::byte> read_range(const std::string& path, std::uint64_t offset,
                                  std::uint64_t length);

// Element-wise conversion used to compare 16-bit values with fp32 truth (exact widening).
std::vector<std::byte> widen_to_f32(DType dtype, const std::vector<std::byte>& bytes);

}  // namespace z2f::testing
