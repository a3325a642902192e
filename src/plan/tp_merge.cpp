#include "plan/tp_merge.hpp"

#include "common/errors.hpp"

namespace z2f::plan {
namespace {

std::string shape_text(const std::vector<std::uint64_t>& shape) {
    std::string out = "(";
    for (std::size_t i = 0; i < shape.size(); ++i) {
        out += (i == 0 ? "" : ", ") + std::to_string(shape[i]);
    }
    return out + ")";
}

// Slices agree on every dimension but `dim`; returns the full shape (sum along dim).
std::vector<std::uint64_t> concatenated_shape(const std::vector<TpSlice>& slices, std::size_t dim,
                                              const std::string& tensor,
                                              const std::string& origin) {
    if (slices.empty()) {
        throw_internal_error("merging no slices of '" + tensor + "'");
    }
    const std::vector<std::uint64_t>& first = slices.front().shape;
    if (dim >= first.size()) {
        throw_input_error(origin, "parameter '" + tensor + "' of shape " + shape_text(first) +
                                      " has no dimension " + std::to_string(dim) +
                                      " to concatenate its tensor-parallel slices along");
    }
    std::vector<std::uint64_t> full = first;
    full[dim] = 0;
    for (std::size_t t = 0; t < slices.size(); ++t) {
        const std::vector<std::uint64_t>& shape = slices[t].shape;
        bool fits = shape.size() == first.size();
        for (std::size_t i = 0; fits && i < shape.size(); ++i) {
            fits = i == dim || shape[i] == first[i];
        }
        if (!fits) {
            throw_input_error(origin, "tensor-parallel slices of '" + tensor +
                                          "' cannot be concatenated along dimension " +
                                          std::to_string(dim) + ": TP rank 0 has shape " +
                                          shape_text(first) + ", TP rank " + std::to_string(t) +
                                          " " + shape_text(shape));
        }
        full[dim] += shape[dim];
    }
    return full;
}

}  // namespace

std::uint64_t product(const std::vector<std::uint64_t>& dims, std::size_t begin, std::size_t end) {
    std::uint64_t out = 1;
    for (std::size_t i = begin; i < end && i < dims.size(); ++i) {
        out *= dims[i];
    }
    return out;
}

MergedTensor merge_cat(const std::vector<TpSlice>& slices, std::size_t dim, std::size_t itemsize,
                       const std::string& tensor, const std::string& origin) {
    MergedTensor merged;
    merged.shape = concatenated_shape(slices, dim, tensor, origin);
    const std::vector<std::uint64_t>& full = merged.shape;
    const std::uint64_t rows = product(full, 0, dim);
    const std::uint64_t inner = product(full, dim + 1, full.size()) * itemsize;
    std::uint64_t before = 0;  // sum of local[dim] over earlier slices
    for (const TpSlice& slice : slices) {
        TensorPiece piece;
        piece.sources.push_back(slice.stream);
        piece.rows = rows;
        piece.row_bytes = slice.shape[dim] * inner;
        piece.stride = full[dim] * inner;
        piece.offset = before * inner;
        piece.source_offset = 0;
        piece.source_stride = piece.row_bytes;
        before += slice.shape[dim];
        merged.pieces.push_back(std::move(piece));
    }
    return merged;
}

std::vector<std::vector<std::uint64_t>> even_sub_param_widths(const std::vector<TpSlice>& slices,
                                                              std::size_t dim, std::uint64_t count,
                                                              const std::string& tensor,
                                                              const std::string& origin) {
    if (count == 0) {
        throw_input_error(origin, "parameter '" + tensor + "': a sub-parameter count of 0");
    }
    std::vector<std::vector<std::uint64_t>> widths(count);
    for (std::size_t t = 0; t < slices.size(); ++t) {
        const auto& shape = slices[t].shape;
        if (dim >= shape.size() || shape[dim] % count != 0) {
            throw_input_error(origin, "TP rank " + std::to_string(t) + " of fused parameter '" +
                                          tensor + "' has shape " + shape_text(shape) +
                                          ", which does not split into " + std::to_string(count) +
                                          " equal sub-parameters along dimension " +
                                          std::to_string(dim));
        }
        for (auto& per_rank : widths) {
            per_rank.push_back(shape[dim] / count);
        }
    }
    return widths;
}

MergedTensor merge_sub_params(const std::vector<TpSlice>& slices, std::size_t dim,
                              const std::vector<std::vector<std::uint64_t>>& widths,
                              std::size_t itemsize, const std::string& tensor,
                              const std::string& origin) {
    MergedTensor merged;
    merged.shape = concatenated_shape(slices, dim, tensor, origin);
    const std::vector<std::uint64_t>& full = merged.shape;
    for (std::size_t t = 0; t < slices.size(); ++t) {
        std::uint64_t sum = 0;
        for (const auto& per_rank : widths) {
            if (per_rank.size() != slices.size()) {
                throw_input_error(origin, "fused parameter '" + tensor + "' records " +
                                              std::to_string(per_rank.size()) +
                                              " shard widths per sub-parameter for " +
                                              std::to_string(slices.size()) + " TP ranks");
            }
            sum += per_rank[t];
        }
        if (sum != slices[t].shape[dim]) {
            throw_input_error(origin, "fused parameter '" + tensor +
                                          "': the shard widths of TP rank " + std::to_string(t) +
                                          " add up to " + std::to_string(sum) + " but its slice " +
                                          shape_text(slices[t].shape) + " has " +
                                          std::to_string(slices[t].shape[dim]) +
                                          " along dimension " + std::to_string(dim));
        }
    }
    const std::uint64_t rows = product(full, 0, dim);
    const std::uint64_t inner = product(full, dim + 1, full.size()) * itemsize;
    std::uint64_t sub_start = 0;  // sum of full sub-parameter sizes before k
    for (const auto& per_rank : widths) {
        std::uint64_t rank_start = 0;  // within sub-parameter k, sum of widths of ranks before t
        for (std::size_t t = 0; t < slices.size(); ++t) {
            std::uint64_t local_before = 0;  // widths of earlier sub-parameters on rank t
            for (const auto& earlier : widths) {
                if (&earlier == &per_rank) {
                    break;
                }
                local_before += earlier[t];
            }
            TensorPiece piece;
            piece.sources.push_back(slices[t].stream);
            piece.rows = rows;
            piece.row_bytes = per_rank[t] * inner;
            piece.stride = full[dim] * inner;
            piece.offset = (sub_start + rank_start) * inner;
            piece.source_offset = local_before * inner;
            piece.source_stride = slices[t].shape[dim] * inner;
            rank_start += per_rank[t];
            merged.pieces.push_back(std::move(piece));
        }
        sub_start += rank_start;
    }
    return merged;
}

MergedTensor merge_replicated(const std::vector<TpSlice>& slices, PieceCombine combine,
                              const std::string& tensor, const std::string& origin) {
    if (slices.empty()) {
        throw_internal_error("merging no slices of '" + tensor + "'");
    }
    for (std::size_t t = 1; t < slices.size(); ++t) {
        if (slices[t].shape != slices.front().shape) {
            throw_input_error(origin, "replicated parameter '" + tensor + "' has shape " +
                                          shape_text(slices.front().shape) + " on TP rank 0 but " +
                                          shape_text(slices[t].shape) + " on TP rank " +
                                          std::to_string(t));
        }
    }
    MergedTensor merged;
    merged.shape = slices.front().shape;
    TensorPiece piece = whole_stream_piece(slices.front().stream);
    if (combine != PieceCombine::kCopy && slices.size() > 1) {
        piece.combine = combine;
        for (std::size_t t = 1; t < slices.size(); ++t) {
            piece.sources.push_back(slices[t].stream);
        }
    }
    merged.pieces.push_back(std::move(piece));
    return merged;
}

MergedTensor truncate_dim0(MergedTensor merged, std::uint64_t rows, std::size_t itemsize,
                           const std::string& tensor, const std::string& origin) {
    if (merged.shape.empty() || rows > merged.shape[0]) {
        throw_input_error(origin, "vocabulary parameter '" + tensor + "' of shape " +
                                      shape_text(merged.shape) + " cannot be cut to " +
                                      std::to_string(rows) + " rows (original_vocab_size)");
    }
    const std::uint64_t limit = rows * product(merged.shape, 1, merged.shape.size()) * itemsize;
    std::vector<TensorPiece> kept;
    for (TensorPiece& piece : merged.pieces) {
        if (piece.row_bytes == 0 || piece.offset >= limit) {
            continue;
        }
        std::uint64_t keep_rows = piece.rows;
        if (piece.rows > 1) {
            keep_rows = (limit - piece.offset + piece.stride - 1) / piece.stride;
            keep_rows = std::min(keep_rows, piece.rows);
            std::uint64_t last_end =
                piece.offset + (keep_rows - 1) * piece.stride + piece.row_bytes;
            if (last_end > limit) {
                throw_internal_error("a row of '" + tensor + "' straddles the vocabulary cut");
            }
        } else if (piece.offset + piece.row_bytes > limit) {
            piece.row_bytes = limit - piece.offset;
        }
        piece.rows = keep_rows;
        kept.push_back(std::move(piece));
    }
    merged.pieces = std::move(kept);
    merged.shape[0] = rows;
    return merged;
}

}  // namespace z2f::plan
