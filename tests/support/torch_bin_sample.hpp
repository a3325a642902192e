// Test-only: writing torch `.bin` layouts to disk the way the execute phase will (fixed regions,
// slot bytes, slot CRCs, tail), and a small deterministic sample plan whose values the Python
// check (tests/python/check_torch_bin.py) recomputes with the same formulas.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "output/output_layout.hpp"
#include "plan/tensor_plan.hpp"

namespace z2f::test {

// Bytes of a slot; must be slot.length long.
using SlotFiller = std::function<std::vector<std::byte>(const output::TensorSlot& slot)>;

// Creates `path` and writes the whole layout: fixed regions, every slot, then the tail built
// from the slots' CRCs. Returns the slot CRCs.
std::vector<std::uint32_t> realize_torch_layout(const output::OutputFileLayout& layout,
                                                const std::string& path, const SlotFiller& fill);

// The same into memory.
std::vector<std::byte> realize_torch_layout_in_memory(const output::OutputFileLayout& layout,
                                                      const SlotFiller& fill);

// Deterministic values for tensor number `index` of the sample, `numel` elements of `dtype`:
// floating types: (index + 1) * 0.5 + j * 0.25 (exact in bf16/f16 for the sample's sizes);
// integers: index * 1000 + 7 * j, plus 2^40 for int64 (needs 64 bits); bool: (index + j) odd.
std::vector<std::byte> sample_values(DType dtype, std::uint64_t numel, std::uint32_t index);

// A plan with fp32, bf16, fp16, fp64, int64, bool tensors, a 0-dim tensor, 0-element tensors and
// a tied alias ("tied.weight" shares "a.weight"). All tensors go to one file in plan order.
plan::TensorPlan sample_plan();

// Filler for sample_plan() layouts: slot.tensor's sample_values.
std::vector<std::byte> sample_slot_bytes(const plan::TensorPlan& plan,
                                         const output::TensorSlot& slot);

}  // namespace z2f::test
