// Serial consolidation for tests: reads a planned tensor's source extents into memory and
// converts them to its output dtype with a simple, independent reference conversion
// (widening only: bf16/fp16 -> fp32, int64/bool -> fp32, or no conversion).
#pragma once

#include <cstddef>
#include <vector>

#include "output/output_layout.hpp"
#include "plan/tensor_plan.hpp"

namespace z2f::testing {

std::vector<std::byte> read_source_bytes(const plan::TensorPlan& plan,
                                         const plan::PlannedTensor& tensor);
std::vector<std::byte> materialize(const plan::TensorPlan& plan, std::size_t index);

// The bytes the execute phase would write for a file whose slots hold plan tensors: fixed
// regions, each slot filled by materialize, the CRC tail (if any) from the slots' CRCs.
std::vector<std::byte> realize_layout(const output::OutputFileLayout& layout,
                                      const plan::TensorPlan& plan);

}  // namespace z2f::testing
