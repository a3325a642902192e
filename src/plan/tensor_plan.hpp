// The consolidation plan: every output tensor, where its bytes come from, and what it becomes.
//
// Produced by the plan phase (a pure function of CheckpointMeta and the options), identical on
// every rank. A tensor's source is a list of extents: byte ranges of input files whose
// concatenation, in order, is the tensor's data in row-major order and in `source_dtype`.
// The output layouts (src/output) then place each tensor at a file offset; the execute phase
// only copies extents to offsets, converting the dtype on the way when asked to.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/dtype.hpp"

namespace z2f::plan {

// A byte range of one input file. `file` indexes TensorPlan::inputs.
struct SourceExtent {
    std::uint32_t file = 0;
    std::uint64_t offset = 0;
    std::uint64_t length = 0;

    friend bool operator==(const SourceExtent&, const SourceExtent&) = default;
};

// Where a tensor sits in zero_to_fp32's state dict (docs/deepspeed-format.md §6.5).
enum class TensorRole : std::uint8_t {
    kBuffer,     // persistent module buffer, from the model-states file
    kFrozen,     // requires_grad=False parameter (no fp32 master exists)
    kTrainable,  // reassembled from the fp32 master partitions
    kAlias,      // a tied parameter: shares the bytes of another tensor (shared_params)
};

struct PlannedTensor {
    std::string name;
    std::vector<std::uint64_t> shape;  // () is a 0-dim scalar with one element
    DType source_dtype = DType::kF32;
    DType output_dtype = DType::kF32;
    TensorRole role = TensorRole::kTrainable;
    // For kAlias: index (in TensorPlan::tensors) of the tensor whose bytes this one shares, and
    // no extents of its own. -1 otherwise.
    std::int64_t alias_of = -1;
    std::vector<SourceExtent> extents;

    std::uint64_t numel() const noexcept;
    std::uint64_t source_bytes() const noexcept { return numel() * dtype_size(source_dtype); }
    std::uint64_t output_bytes() const noexcept { return numel() * dtype_size(output_dtype); }
    bool is_alias() const noexcept { return alias_of >= 0; }
};

// An input file the plan reads from.
struct InputFile {
    std::string path;
    std::uint64_t size = 0;
};

struct TensorPlan {
    std::vector<InputFile> inputs;
    // In zero_to_fp32's state-dict order: buffers, frozen, trainable, aliases. This order drives
    // the Hugging Face shard split.
    std::vector<PlannedTensor> tensors;
};

}  // namespace z2f::plan
