// Pieces: how a merged tensor (TP slices, replicas, tied copies) is assembled from the
// streams its sources provide (docs/parallel-checkpoints.md §3).
//
// The tensor's bytes (source dtype, row-major) are the union of its pieces. A piece reads one
// stream: the concatenation of the extents of one source (every source of a piece has the same
// length). Row i (i = 0..rows-1) of the piece is the `row_bytes` bytes at stream offset
// `source_offset + i * source_stride`, placed at tensor byte `offset + i * stride`.
//
//   kCopy        one source; its row bytes are written
//   kCheckEqual  every source is a replica (TP-replicated parameter, tied pipeline copy): they
//                must be bit-equal, the first is written
//   kAverage     every source is a replica to average element-wise (in the source dtype's
//                values, computed in fp32 or wider), the mean is written
//
// Source strides generalise the contiguous stream (source_offset 0, source_stride = row_bytes):
// a sub-parameter of a fused tensor split along a dimension d > 0 is a strided sub-block of each
// rank's slice, which would otherwise need one extent per row. Every formula in
// tp_merge.hpp keeps the plan's size independent of the number of rows.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/extent.hpp"

namespace z2f::plan {

enum class PieceCombine : std::uint8_t { kCopy, kCheckEqual, kAverage };

struct TensorPiece {
    std::vector<std::vector<SourceExtent>> sources;  // one; or every replica (check/average)
    PieceCombine combine = PieceCombine::kCopy;
    std::uint64_t offset = 0;         // tensor byte of row 0
    std::uint64_t row_bytes = 0;      // bytes per row
    std::uint64_t rows = 1;           // number of rows
    std::uint64_t stride = 0;         // tensor bytes between rows
    std::uint64_t source_offset = 0;  // stream byte of row 0
    std::uint64_t source_stride = 0;  // stream bytes between rows

    friend bool operator==(const TensorPiece&, const TensorPiece&) = default;
};

// Sum of the extents' lengths.
std::uint64_t stream_bytes(const std::vector<SourceExtent>& stream);

// Bytes [begin, begin + length) of a stream, as extents (neighbouring ranges of one file
// merged). The range must lie inside the stream.
std::vector<SourceExtent> slice_stream(const std::vector<SourceExtent>& stream, std::uint64_t begin,
                                       std::uint64_t length);

// A piece copying a whole stream to tensor bytes [offset, offset + stream length).
TensorPiece whole_stream_piece(std::vector<SourceExtent> stream, std::uint64_t offset = 0);

// Checks that the pieces are well-formed (every source long enough for the rows it is read at,
// replicas of equal length, one source for kCopy) and cover bytes [0, tensor_bytes) exactly
// once. Throws an internal error naming `tensor` otherwise: pieces are built by this program.
void check_pieces(const std::vector<TensorPiece>& pieces, std::uint64_t tensor_bytes,
                  const std::string& tensor);

// True when every piece can be executed by copying its first source (kCopy, or kCheckEqual
// whose check is done elsewhere); false when some piece needs kAverage.
bool flattenable(const std::vector<TensorPiece>& pieces);

// The replicas of a tensor that is the element-wise mean of whole replicas: one kAverage
// piece covering the tensor from its first byte with contiguous rows; each replica's stream cut
// to the tensor's bytes. Empty when the pieces are not of that form.
std::vector<std::vector<SourceExtent>> averaged_replicas(const std::vector<TensorPiece>& pieces,
                                                         std::uint64_t tensor_bytes);

// The ordered extents whose concatenation is the tensor, for a copy engine that knows only flat
// extent lists: each piece's rows expanded, sorted by tensor offset, neighbours merged.
// kCheckEqual pieces contribute their first source (the check itself is not performed);
// kAverage pieces are an internal error (see flattenable). The pieces must pass check_pieces.
std::vector<SourceExtent> flatten_pieces(const std::vector<TensorPiece>& pieces,
                                         std::uint64_t tensor_bytes, const std::string& tensor);

// The same for tensor bytes [begin, end) only: what a write range needs, generated when it is
// written, so that memory follows the range and not the tensor. Equal to the bytes [begin, end)
// of flatten_pieces(pieces, ...), cut like sub_extents cuts them. Rows that do not touch the
// range are skipped arithmetically (no pass over the tensor's rows).
std::vector<SourceExtent> flatten_piece_range(const std::vector<TensorPiece>& pieces,
                                              std::uint64_t begin, std::uint64_t end,
                                              const std::string& tensor);

// True when flatten_pieces gives at most a few extents per piece and source extent: every
// piece is one row or rows laid end to end in both the stream and the tensor. The plan stores
// such tensors flat; the others (row-parallel weights: one extent per row and TP rank) keep
// their pieces and are flattened range by range (flatten_piece_range).
bool flat_is_compact(const std::vector<TensorPiece>& pieces);

}  // namespace z2f::plan
