// The piece formulas of tp_merge.hpp against a reference built index by index: cat along every
// dimension of 1-D to 3-D tensors with uneven widths at TP = 1..4, fused sub-parameters at
// TP = 2 and 4 (even and recorded widths, dim 0 and dim 1), replicas, vocabulary truncation,
// and flatten_pieces / flatten_piece_range / check_pieces.
#include "plan/tensor_piece.hpp"

#include <algorithm>
#include <cstring>
#include <functional>
#include <numeric>

#include <gtest/gtest.h>

#include "plan/tensor_plan.hpp"
#include "plan/tp_merge.hpp"
#include "zero2fp32/error.hpp"

namespace z2f::plan {
namespace {

using Shape = std::vector<std::uint64_t>;
constexpr std::size_t kItem = 4;

// Slice t lives alone in "file" t; its element j holds the value t * 1'000'000 + j.
struct Slices {
    std::vector<TpSlice> slices;
    std::vector<std::vector<std::uint32_t>> files;
};

Slices make_slices(const std::vector<Shape>& shapes) {
    Slices out;
    for (std::size_t t = 0; t < shapes.size(); ++t) {
        std::uint64_t n = product(shapes[t], 0, shapes[t].size());
        std::vector<std::uint32_t> values(n);
        for (std::uint64_t j = 0; j < n; ++j)
            values[j] = static_cast<std::uint32_t>(t * 1'000'000 + j);
        // A stream of two extents (split in the middle) exercises extent boundaries.
        std::vector<SourceExtent> stream;
        std::uint64_t half = (n / 2) * kItem;
        stream.push_back({static_cast<std::uint32_t>(t), 0, half});
        stream.push_back({static_cast<std::uint32_t>(t), half, n * kItem - half});
        if (half == 0)
            stream.erase(stream.begin());
        out.slices.push_back({shapes[t], stream});
        out.files.push_back(std::move(values));
    }
    return out;
}

std::vector<std::byte> read(const Slices& s, const std::vector<SourceExtent>& stream) {
    std::vector<std::byte> out;
    for (const SourceExtent& e : stream) {
        const auto* base = reinterpret_cast<const std::byte*>(s.files.at(e.file).data());
        out.insert(out.end(), base + e.offset, base + e.offset + e.length);
    }
    return out;
}

std::vector<std::uint32_t> execute(const Slices& s, const MergedTensor& merged) {
    std::uint64_t bytes = product(merged.shape, 0, merged.shape.size()) * kItem;
    check_pieces(merged.pieces, bytes, "t");
    std::vector<std::byte> out(bytes);
    for (const TensorPiece& piece : merged.pieces) {
        std::vector<std::byte> stream = read(s, piece.sources.front());
        for (std::uint64_t i = 0; i < piece.rows; ++i) {
            std::memcpy(&out[piece.offset + i * piece.stride],
                        &stream[piece.source_offset + i * piece.source_stride], piece.row_bytes);
        }
    }
    // The flat extents say the same.
    const std::vector<SourceExtent> flat = flatten_pieces(merged.pieces, bytes, "t");
    EXPECT_EQ(read(s, flat), out);
    // And so does every range of them flattened on its own (as a write range reads them), at
    // byte cuts that split elements and rows too.
    const std::uint64_t step = std::max<std::uint64_t>(1, bytes / 40);
    for (std::uint64_t begin = 0; begin <= bytes; begin += step) {
        for (std::uint64_t end = begin; end <= bytes; end += step) {
            EXPECT_EQ(flatten_piece_range(merged.pieces, begin, end, "t"),
                      sub_extents(flat, begin, end))
                << "bytes [" << begin << ", " << end << ") of " << bytes;
        }
        EXPECT_EQ(flatten_piece_range(merged.pieces, begin, bytes, "t"),
                  sub_extents(flat, begin, bytes));
    }
    std::vector<std::uint32_t> values(bytes / kItem);
    std::memcpy(values.data(), out.data(), bytes);
    return values;
}

// Visits every multi-index of `shape` in row-major order.
void for_each_index(const Shape& shape, const std::function<void(const Shape&)>& visit) {
    Shape index(shape.size(), 0);
    if (product(shape, 0, shape.size()) == 0)
        return;
    while (true) {
        visit(index);
        std::size_t d = shape.size();
        while (d > 0 && ++index[d - 1] == shape[d - 1]) {
            index[d - 1] = 0;
            --d;
        }
        if (d == 0)
            return;
    }
}

std::uint64_t flat(const Shape& shape, const Shape& index) {
    std::uint64_t out = 0;
    for (std::size_t d = 0; d < shape.size(); ++d)
        out = out * shape[d] + index[d];
    return out;
}

// full[...] along `dim` comes from rank t at local position `local` (reference mapping).
std::vector<std::uint32_t> reference(
    const Shape& full, std::size_t dim, const std::vector<Shape>& locals,
    const std::function<std::pair<std::size_t, std::uint64_t>(std::uint64_t)>& map) {
    std::vector<std::uint32_t> out;
    for_each_index(full, [&](const Shape& index) {
        auto [t, local_d] = map(index[dim]);
        Shape local = index;
        local[dim] = local_d;
        out.push_back(static_cast<std::uint32_t>(t * 1'000'000 + flat(locals[t], local)));
    });
    return out;
}

TEST(TpMerge, CatAlongEveryDimensionUnevenWidths) {
    const std::vector<Shape> bases = {{7}, {5, 3}, {3, 4, 2}};
    for (const Shape& base : bases) {
        for (std::size_t dim = 0; dim < base.size(); ++dim) {
            for (std::size_t tp = 1; tp <= 4; ++tp) {
                SCOPED_TRACE("rank " + std::to_string(base.size()) + " dim " + std::to_string(dim) +
                             " tp " + std::to_string(tp));
                std::vector<Shape> locals;
                for (std::size_t t = 0; t < tp; ++t) {
                    Shape local = base;
                    local[dim] = base[dim] + t;  // uneven widths
                    locals.push_back(local);
                }
                Slices s = make_slices(locals);
                MergedTensor merged = merge_cat(s.slices, dim, kItem, "t", "f");
                Shape full = base;
                full[dim] = 0;
                for (const Shape& l : locals)
                    full[dim] += l[dim];
                EXPECT_EQ(merged.shape, full);
                EXPECT_EQ(merged.pieces.size(), tp);  // one piece per rank, any number of rows
                EXPECT_EQ(merged.pieces.back().rows, product(full, 0, dim));
                auto expected = reference(full, dim, locals, [&](std::uint64_t i) {
                    std::size_t t = 0;
                    while (i >= locals[t][dim]) {
                        i -= locals[t][dim];
                        ++t;
                    }
                    return std::pair<std::size_t, std::uint64_t>(t, i);
                });
                EXPECT_EQ(execute(s, merged), expected);
            }
        }
    }
}

TEST(TpMerge, CatDimOneFormula) {
    // Row-parallel [16, 21] x 2: rows = 16, row_bytes = 21 * 4, stride = 42 * 4, offsets 0, 84.
    Slices s = make_slices({{16, 21}, {16, 21}});
    MergedTensor merged = merge_cat(s.slices, 1, kItem, "t", "f");
    ASSERT_EQ(merged.pieces.size(), 2u);
    EXPECT_EQ(merged.pieces[1].rows, 16u);
    EXPECT_EQ(merged.pieces[1].row_bytes, 84u);
    EXPECT_EQ(merged.pieces[1].stride, 168u);
    EXPECT_EQ(merged.pieces[1].offset, 84u);
}

void check_sub_params(const std::vector<Shape>& locals, std::size_t dim,
                      const std::vector<std::vector<std::uint64_t>>& widths) {
    Slices s = make_slices(locals);
    MergedTensor merged = merge_sub_params(s.slices, dim, widths, kItem, "t", "f");
    EXPECT_EQ(merged.pieces.size(), widths.size() * locals.size());
    Shape full = merged.shape;
    auto expected = reference(full, dim, locals, [&](std::uint64_t i) {
        for (std::size_t k = 0; k < widths.size(); ++k) {
            std::uint64_t size = std::accumulate(widths[k].begin(), widths[k].end(), 0ull);
            if (i >= size) {
                i -= size;
                continue;
            }
            for (std::size_t t = 0; t < locals.size(); ++t) {
                if (i < widths[k][t]) {
                    std::uint64_t before = 0;
                    for (std::size_t j = 0; j < k; ++j)
                        before += widths[j][t];
                    return std::pair<std::size_t, std::uint64_t>(t, before + i);
                }
                i -= widths[k][t];
            }
        }
        ADD_FAILURE() << "index outside the sub-parameters";
        return std::pair<std::size_t, std::uint64_t>(0, 0);
    });
    EXPECT_EQ(execute(s, merged), expected);
}

TEST(TpMerge, TwoSubParamsLikeSwiGlu) {
    // Each rank holds [gate_t; up_t]; full = [gate_0; gate_1; up_0; up_1].
    for (std::size_t tp : {2u, 4u}) {
        std::vector<Shape> locals(tp, Shape{6, 3});
        Slices s = make_slices(locals);
        auto widths = even_sub_param_widths(s.slices, 0, 2, "t", "f");
        EXPECT_EQ(widths,
                  (std::vector<std::vector<std::uint64_t>>(2, std::vector<std::uint64_t>(tp, 3))));
        check_sub_params(locals, 0, widths);
        std::vector<Shape> biases(tp, Shape{6});
        check_sub_params(biases, 0, widths);
    }
    // Gate part of rank 1 lands right after rank 0's gate part, before any up part.
    Slices s = make_slices({{4, 2}, {4, 2}});
    MergedTensor merged = merge_sub_params(s.slices, 0, {{2, 2}, {2, 2}}, kItem, "t", "f");
    EXPECT_EQ(merged.pieces[1].offset, 2u * 2 * kItem);  // gate of rank 1
    EXPECT_EQ(merged.pieces[1].source_offset, 0u);
    EXPECT_EQ(merged.pieces[2].offset, 4u * 2 * kItem);  // up of rank 0
    EXPECT_EQ(merged.pieces[2].source_offset, 2u * 2 * kItem);
}

TEST(TpMerge, SubParamsWithRecordedUnevenWidthsAndAlongDimOne) {
    // Fused QKV with GQA-like uneven widths at TP 2 and 4, split along dim 0 and along dim 1.
    check_sub_params({{5, 3}, {5, 3}}, 0, {{2, 2}, {1, 1}, {2, 2}});
    check_sub_params({{4, 3}, {3, 3}, {4, 3}, {3, 3}}, 0, {{2, 1, 2, 1}, {2, 2, 2, 2}});
    check_sub_params({{3, 5, 2}, {3, 5, 2}}, 1, {{3, 3}, {2, 2}});
    check_sub_params({{2, 4}, {2, 2}, {2, 4}, {2, 2}}, 1, {{2, 1, 2, 1}, {2, 1, 2, 1}});
    // Widths that do not add up to a slice are an input error.
    Slices s = make_slices({{4}, {4}});
    EXPECT_THROW(merge_sub_params(s.slices, 0, {{2, 2}, {1, 2}}, kItem, "t", "f"), Error);
    EXPECT_THROW(even_sub_param_widths(make_slices({{5}}).slices, 0, 2, "t", "f"), Error);
}

TEST(TpMerge, ReplicatedPieces) {
    Slices s = make_slices({{3, 2}, {3, 2}, {3, 2}});
    MergedTensor check = merge_replicated(s.slices, PieceCombine::kCheckEqual, "t", "f");
    ASSERT_EQ(check.pieces.size(), 1u);
    EXPECT_EQ(check.pieces[0].sources.size(), 3u);
    EXPECT_TRUE(flattenable(check.pieces));
    // Neighbouring extents of one file merge.
    EXPECT_EQ(flatten_pieces(check.pieces, 24, "t"), (std::vector<SourceExtent>{{0, 0, 24}}));
    MergedTensor first = merge_replicated(s.slices, PieceCombine::kCopy, "t", "f");
    EXPECT_EQ(first.pieces[0].sources.size(), 1u);
    MergedTensor average = merge_replicated(s.slices, PieceCombine::kAverage, "t", "f");
    EXPECT_FALSE(flattenable(average.pieces));
    EXPECT_THROW(flatten_pieces(average.pieces, 24, "t"), Error);
    EXPECT_THROW(merge_replicated(make_slices({{3}, {4}}).slices, PieceCombine::kCopy, "t", "f"),
                 Error);
}

TEST(TpMerge, VocabularyTruncation) {
    // 52 padded rows over 2 ranks of 26; keep 50: rank 1's piece shortened by two rows.
    Slices s = make_slices({{26, 4}, {26, 4}});
    MergedTensor merged =
        truncate_dim0(merge_cat(s.slices, 0, kItem, "t", "f"), 50, kItem, "t", "f");
    EXPECT_EQ(merged.shape, (Shape{50, 4}));
    auto values = execute(s, merged);
    ASSERT_EQ(values.size(), 200u);
    EXPECT_EQ(values[104], 1'000'000u);  // row 26 = rank 1's row 0
    EXPECT_EQ(values[199], 1'000'000u + 23 * 4 + 3);
    // A cut inside rank 0 drops rank 1 entirely; cutting a row-parallel merge keeps its rows.
    EXPECT_EQ(
        truncate_dim0(merge_cat(s.slices, 0, kItem, "t", "f"), 10, kItem, "t", "f").pieces.size(),
        1u);
    MergedTensor rows = truncate_dim0(
        merge_cat(make_slices({{6, 2}, {6, 3}}).slices, 1, kItem, "t", "f"), 4, kItem, "t", "f");
    EXPECT_EQ(rows.pieces[1].rows, 4u);
    EXPECT_THROW(truncate_dim0(merge_cat(s.slices, 0, kItem, "t", "f"), 53, kItem, "t", "f"),
                 Error);
}

TEST(TensorPiece, CheckPiecesFindsGapsOverlapsAndShortSources) {
    std::vector<SourceExtent> stream = {{0, 0, 8}};
    EXPECT_NO_THROW(check_pieces({whole_stream_piece(stream)}, 8, "t"));
    EXPECT_THROW(check_pieces({whole_stream_piece(stream)}, 12, "t"), Error);  // gap at the end
    EXPECT_THROW(check_pieces({whole_stream_piece(stream), whole_stream_piece(stream, 4)}, 12, "t"),
                 Error);  // overlap
    TensorPiece strided = whole_stream_piece(stream);
    strided.rows = 2;
    strided.row_bytes = 8;
    strided.source_stride = 8;
    strided.stride = 8;
    EXPECT_THROW(check_pieces({strided}, 16, "t"), Error);  // the source holds one row only
    EXPECT_EQ(slice_stream({{0, 0, 4}, {0, 4, 4}, {1, 0, 8}}, 2, 8),
              (std::vector<SourceExtent>{{0, 2, 6}, {1, 0, 2}}));
    EXPECT_THROW(slice_stream(stream, 4, 5), Error);
}

TEST(TensorPiece, RowParallelWeightOf405bIsFlattenedRangeByRange) {
    // Llama-405B's down_proj [16384, 53248] at TP = 8 (slices of [16384, 6656], fp32): the
    // flat form would be 131,072 extents. A 4 MiB write range needs only its own rows.
    constexpr std::uint64_t rows = 16384, cols = 53248, tp = 8;
    std::vector<TpSlice> slices;
    for (std::uint32_t t = 0; t < tp; ++t)
        slices.push_back({{rows, cols / tp}, {{t, 4096, rows * cols / tp * kItem}}});
    MergedTensor merged = merge_cat(slices, 1, kItem, "down_proj", "f");
    EXPECT_FALSE(flat_is_compact(merged.pieces));
    const std::uint64_t row = cols * kItem;  // one output row: 8 slice rows of 26,624 bytes
    const std::uint64_t begin = 1000 * row + 12345 * kItem, end = begin + (4u << 20);
    std::vector<SourceExtent> part = flatten_piece_range(merged.pieces, begin, end, "down_proj");
    EXPECT_LE(part.size(), (end - begin) / (cols / tp * kItem) + 2);
    std::uint64_t total = 0;
    for (const SourceExtent& e : part)
        total += e.length;
    EXPECT_EQ(total, end - begin);
    // The first extent is the rest of the row of slice 12345 / 6656 = 1, from its element
    // 12345 - 6656 = 5689.
    EXPECT_EQ(part.front(), (SourceExtent{1, 4096 + (1000 * (cols / tp) + 5689) * kItem,
                                          (cols / tp - 5689) * kItem}));
}

}  // namespace
}  // namespace z2f::plan
