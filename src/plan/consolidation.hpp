// The consolidation plan: which tensors zero_to_fp32 would produce, in which order, from which
// bytes, and in which output dtype (docs/deepspeed-format.md §6). Pure: no I/O, no MPI.
//
// Order (§6.5): persistent buffers (module order), frozen parameters (frozen_param_shapes order,
// or module order for stage-1 frozen parameters), trainable parameters (param_shapes order,
// group by group), tied aliases (shared_params order).
//
// Where the bytes are (W = world size):
//   stage 1/2  group g is the concatenation, in rank order, of every rank's saved partition
//              (lengths L_r from the files, padding stripped or - BF16_Optimizer - kept). A
//              parameter at flat offset f of n elements reads [f, f+n) of that concatenation,
//              located through the prefix sums of L_r.
//   stage 3    parameter p (n elements) is padded to P = ceil(n/W) per rank and sits at the
//              same offset o_p = sum of P over earlier parameters on every rank; elements
//              [rP, min((r+1)P, n)) are at [o_p, o_p + len) of rank r's concatenated
//              fp32_flat_groups. Frozen parameters: the same split over each rank's
//              frozen_param_fragments entry.
//   frozen     stage 2: the whole tensor from the model file; stage 1 (none saved in
//              frozen_param_shapes): the module's copy, in the model's dtype.
//
// Dtype policy: every floating tensor becomes `dtype` (default fp32); integer and bool
// buffers keep theirs. cast_all_buffers turns every buffer into fp32 and keep_frozen_dtype
// keeps frozen parameters in their stored dtype, as zero_to_fp32 does (--parity = both).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "checkpoint/checkpoint_meta.hpp"
#include "common/dtype.hpp"
#include "plan/tensor_plan.hpp"
#include "zero2fp32/options.hpp"

namespace z2f::plan {

// What trainable parameters are reassembled from: the fp32 master partitions (HF output), or one
// of Adam's moments (universal output, docs/universal-checkpoint.md §2). The moments of a flat
// group are laid out exactly like its master partition (padding kept or stripped alike, or only
// at the end), so the same extents formula applies. Buffers, frozen parameters and aliases are
// planned as usual whatever the stream.
enum class Stream : std::uint8_t { kMaster, kExpAvg, kExpAvgSq };

struct PlanOptions {
    DType dtype = DType::kF32;
    bool cast_all_buffers = false;
    bool keep_frozen_dtype = false;
    bool exclude_frozen = false;
    Stage1Frozen stage1_frozen = Stage1Frozen::kEmit;
    // A moment stream needs every rank's moments of every group: absent ones are an input error.
    Stream stream = Stream::kMaster;
};

// "fp32", "exp_avg", "exp_avg_sq": the optimizer-state key of a stream, as universal checkpoints
// name their files.
std::string_view stream_name(Stream stream) noexcept;

struct ConsolidationPlan {
    TensorPlan plan;
    std::vector<std::string> warnings;  // things the user should know (printed always)
    std::vector<std::string> notes;     // informational (printed with -v)
};

// ZeRO-3's partitioning of one parameter of `numel` elements over `world` ranks: every rank holds
// per_rank = ceil(numel / world) elements (the last ones padding), rank r the real elements
// [begin, begin + count) = [r * per_rank, min((r + 1) * per_rank, numel)), possibly none.
struct Stage3Slice {
    std::uint64_t per_rank = 0;
    std::uint64_t begin = 0;
    std::uint64_t count = 0;
};
Stage3Slice stage3_slice(std::uint64_t numel, std::uint32_t world, std::uint32_t rank) noexcept;

ConsolidationPlan plan_consolidation(const checkpoint::CheckpointMeta& meta,
                                     const PlanOptions& options);

}  // namespace z2f::plan
