// The TP merge formulas as pieces (docs/parallel-checkpoints.md §3). Pure: shapes and streams
// in, pieces out. A "slice" is one TP rank's local tensor: its shape and the stream of its
// bytes (row-major, source dtype, itemsize bytes per element). T is the number of slices.
//
//   cat along d      full[d] = sum of local_t[d], every other dimension equal. Slice t is one
//                    piece: rows = prod(full[:d]), row_bytes = prod(local_t[d:]) * itemsize,
//                    stride = prod(full[d:]) * itemsize,
//                    offset = (sum of local_s[d], s < t) * prod(full[d+1:]) * itemsize.
//                    d = 0 gives one contiguous row per slice; d = 1 (row-parallel weights)
//                    prod(full[:1]) rows per slice.
//   sub-parameters   a fused tensor of K sub-parameters along d (SwiGLU's [gate; up], fused
//                    QKV), each split over the ranks on its own: slice t holds
//                    [sub_0 part t; sub_1 part t; ...] with widths w[k][t] along d, and the full
//                    tensor is [sub_0 part 0..T-1; sub_1 part 0..T-1; ...]. One piece per
//                    (k, t): rows = prod(full[:d]), row_bytes = w[k][t] * inner,
//                    source_offset = (sum of w[j][t], j < k) * inner,
//                    source_stride = local_t[d] * inner, stride = full[d] * inner,
//                    offset = (sum of S_j, j < k) * inner + (sum of w[k][s], s < t) * inner,
//                    with inner = prod(full[d+1:]) * itemsize and S_j = sum of w[j][t] over t.
//                    Megatron's parameter_with_2_sub_params_cat_dim_0 is K = 2, d = 0,
//                    w[k][t] = local_t[0] / 2.
//   replicated       every slice is the whole tensor: one piece over all slices, kCheckEqual
//                    (default), kCopy of the first slice, or kAverage.
//   truncate dim 0   the first `rows` rows of dim 0 of a merged tensor (stripping a padded
//                    vocabulary): each piece's rows past the limit dropped; a single-row piece
//                    straddling it is shortened.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plan/tensor_piece.hpp"

namespace z2f::plan {

struct TpSlice {
    std::vector<std::uint64_t> shape;
    std::vector<SourceExtent> stream;
};

struct MergedTensor {
    std::vector<std::uint64_t> shape;
    std::vector<TensorPiece> pieces;
};

// Every function checks the slices' shapes against its rule and throws an input error naming
// `tensor` (the parameter) and `origin` (a file) when they do not fit.
MergedTensor merge_cat(const std::vector<TpSlice>& slices, std::size_t dim, std::size_t itemsize,
                       const std::string& tensor, const std::string& origin);
// widths[k][t]: the width along `dim` of sub-parameter k on rank t.
MergedTensor merge_sub_params(const std::vector<TpSlice>& slices, std::size_t dim,
                              const std::vector<std::vector<std::uint64_t>>& widths,
                              std::size_t itemsize, const std::string& tensor,
                              const std::string& origin);
// Widths of K equal sub-parameters, each split evenly: w[k][t] = local_t[dim] / K.
std::vector<std::vector<std::uint64_t>> even_sub_param_widths(const std::vector<TpSlice>& slices,
                                                              std::size_t dim, std::uint64_t count,
                                                              const std::string& tensor,
                                                              const std::string& origin);
MergedTensor merge_replicated(const std::vector<TpSlice>& slices, PieceCombine combine,
                              const std::string& tensor, const std::string& origin);
MergedTensor truncate_dim0(MergedTensor merged, std::uint64_t rows, std::size_t itemsize,
                           const std::string& tensor, const std::string& origin);

std::uint64_t product(const std::vector<std::uint64_t>& dims, std::size_t begin, std::size_t end);

}  // namespace z2f::plan
