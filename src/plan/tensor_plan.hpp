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
#include "common/extent.hpp"
#include "plan/tensor_piece.hpp"
#include "zero2fp32/plan.hpp"

namespace z2f::plan {

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
    // Tensors of parallel checkpoints (plan/parallel_plan.hpp): how the bytes are assembled
    // from several sources (TP slices, replicas, tied copies). Empty when `extents` alone say
    // it (data-parallel checkpoints, aliases). When set, `extents` are their flattening
    // (flatten_pieces) if that is compact (flat_is_compact); otherwise `extents` stay empty
    // and every reader flattens the range it needs (part_extents, source_extents): a
    // row-parallel weight would be one extent per row and TP rank, on every rank.
    std::vector<TensorPiece> pieces;
    // A tensor that is the element-wise mean of whole replicas (--tp-replicated average, or a
    // checkpoint's parameter_to_average_patterns): each replica's stream, and no `extents`.
    // The copy engines compute the mean (io/replica_mean.hpp).
    std::vector<std::vector<SourceExtent>> replicas;
    // How a parallel checkpoint's tensor is made ("cat dim 0 over 2 TP ranks", "replicated,
    // checked", "expert 3 of MoE layer 0", ...), for --dry-run and -d; empty otherwise.
    std::string merge;

    std::uint64_t numel() const noexcept;
    std::uint64_t source_bytes() const noexcept { return numel() * dtype_size(source_dtype); }
    std::uint64_t output_bytes() const noexcept { return numel() * dtype_size(output_dtype); }
    bool is_alias() const noexcept { return alias_of >= 0; }
    // Bytes described by `pieces` alone, flattened range by range when read.
    bool extents_from_pieces() const noexcept {
        return extents.empty() && replicas.empty() && !pieces.empty() && flattenable(pieces);
    }
};

// The bytes [begin, end) of the concatenation of `extents`, as extents (the first and last
// cut to fit). `end` past the extents' total is an internal error.
std::vector<SourceExtent> sub_extents(const std::vector<SourceExtent>& extents, std::uint64_t begin,
                                      std::uint64_t end);

// The source extents of output bytes [skip, skip + length) of `tensor` (an owner, not an
// alias): whole output elements, mapped to the same elements of the source. A range that
// splits an output element is an internal error (plan/ownership.hpp never cuts one).
std::vector<SourceExtent> part_extents(const PlannedTensor& tensor, std::uint64_t skip,
                                       std::uint64_t length);
// The same for one of the tensor's streams (its extents, or one of its replicas).
// (part_extents above covers tensors whose extents come from their pieces too.)
std::vector<SourceExtent> part_extents(const PlannedTensor& tensor,
                                       const std::vector<SourceExtent>& stream, std::uint64_t skip,
                                       std::uint64_t length);

// Every source extent of `tensor` (an owner whose bytes are not averaged), in order: its
// extents, or its pieces flattened now (transient; a row-parallel weight's rows).
std::vector<SourceExtent> source_extents(const PlannedTensor& tensor);

struct TensorPlan {
    std::vector<InputFile> inputs;
    // The storage records of the inputs that tensors were located in, sorted by (file, offset):
    // what the input CRC check covers (run/input_check.hpp).
    std::vector<InputRecord> records;
    // In zero_to_fp32's state-dict order: buffers, frozen, trainable, aliases. This order drives
    // the Hugging Face shard split.
    std::vector<PlannedTensor> tensors;
};

}  // namespace z2f::plan
