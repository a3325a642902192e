// The tensors a conversion wrote in one Hugging Face format, read back through the test
// support's own readers (every *.safetensors or *.bin file of a folder, or (HDF5) the datasets of
// its single model.h5 named like the expected tensors), and compared with a state dict.
#pragma once

#include <string>
#include <vector>

#include "support/expected_state.hpp"
#include "zero2fp32/options.hpp"

namespace z2f::testing {

std::vector<ExpectedTensor> read_format_outputs(const std::string& dir, OutputFormat format,
                                                const std::vector<ExpectedTensor>& expected);

// The same, with every tied alias under its own name: a safetensors alias is in the metadata only
// (`alias -> owner` in every shard's __metadata__), so it is added with its owner's bytes; .bin
// and HDF5 outputs hold aliases by name already. An alias whose owner is in no file is left out
// (state_dict_differences then names it missing).
std::vector<ExpectedTensor> read_format_outputs_with_aliases(
    const std::string& dir, OutputFormat format, const std::vector<ExpectedTensor>& expected);

// Empty when `ours` holds exactly the tensors of `expected`, no more, each with its shape and,
// floating ones, the bytes `dtype` gives them (torch's rounding or exact widening,
// io/dtype_convert.hpp); otherwise one line per difference.
std::string state_dict_differences(const std::vector<ExpectedTensor>& ours,
                                   const std::vector<ExpectedTensor>& expected, DType dtype);

}  // namespace z2f::testing
