// The element-wise mean of a tensor's replicas (--tp-replicated average, a checkpoint's
// parameter_to_average_patterns), computed as DeepSpeed's ds_to_universal.py computes it,
// `sum(slices) / len(slices)` on torch tensors:
//
//   mean = (((0 + r0) + r1) + ... + r(n-1)) / n
//
// every addition and the division in the replicas' dtype as torch does it on a CPU: in float,
// rounded to the dtype after each operation (a no-op for float32; bfloat16 and float16 round to
// nearest, ties to even, as dtype_convert.hpp). The leading `0 +` is Python's sum(): it turns
// a -0.0 of the first replica into +0.0. Replicas are read in the order the plan lists them
// (TP rank order).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "common/dtype.hpp"
#include "common/extent.hpp"
#include "io/input_files.hpp"

namespace z2f::io {

// Means of `replicas` (each `out.size() / dtype_size(dtype)` elements of `dtype`, a float32,
// bfloat16 or float16 type; another dtype is an unsupported-input error) into `out`.
void replica_mean(DType dtype, std::span<const std::span<const std::byte>> replicas,
                  std::span<std::byte> out);

// Reads the replicas' streams (extents of equal total length, a whole number of elements) chunk
// by chunk through `scratch` and calls `emit` with each chunk of means, in order. `scratch`
// must hold one element per replica and one for the means; the chunk is as large as it allows.
void stream_replica_mean(InputFiles& inputs, std::span<const std::vector<SourceExtent>> replicas,
                         DType dtype, std::span<std::byte> scratch,
                         const std::function<void(std::span<const std::byte>)>& emit);

}  // namespace z2f::io
