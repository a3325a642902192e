#include "plan/tensor_piece.hpp"

#include <algorithm>

#include "common/errors.hpp"

namespace z2f::plan {
namespace {

void append_merged(std::vector<SourceExtent>& out, const SourceExtent& extent) {
    if (extent.length == 0) {
        return;
    }
    if (!out.empty() && out.back().file == extent.file &&
        out.back().offset + out.back().length == extent.offset) {
        out.back().length += extent.length;
    } else {
        out.push_back(extent);
    }
}

// Walks a stream forward: successive reads at non-decreasing offsets cost O(extents) in all.
class StreamCursor {
  public:
    explicit StreamCursor(const std::vector<SourceExtent>& stream) : stream_(stream) {}

    void read(std::uint64_t begin, std::uint64_t length, std::vector<SourceExtent>& out) {
        if (begin < start_) {  // rewind (rows of another piece)
            index_ = 0;
            start_ = 0;
        }
        while (index_ < stream_.size() && start_ + stream_[index_].length <= begin) {
            start_ += stream_[index_].length;
            ++index_;
        }
        std::size_t index = index_;
        std::uint64_t start = start_;
        while (length > 0) {
            if (index >= stream_.size()) {
                throw_internal_error("stream range past its end");
            }
            const SourceExtent& extent = stream_[index];
            std::uint64_t local = begin - start;
            std::uint64_t take = std::min(length, extent.length - local);
            append_merged(out, {extent.file, extent.offset + local, take});
            begin += take;
            length -= take;
            start += extent.length;
            ++index;
        }
    }

  private:
    const std::vector<SourceExtent>& stream_;
    std::size_t index_ = 0;
    std::uint64_t start_ = 0;
};

}  // namespace

std::uint64_t stream_bytes(const std::vector<SourceExtent>& stream) {
    std::uint64_t total = 0;
    for (const SourceExtent& extent : stream) {
        total += extent.length;
    }
    return total;
}

std::vector<SourceExtent> slice_stream(const std::vector<SourceExtent>& stream, std::uint64_t begin,
                                       std::uint64_t length) {
    if (begin > stream_bytes(stream) || length > stream_bytes(stream) - begin) {
        throw_internal_error("slice of a stream past its end");
    }
    std::vector<SourceExtent> out;
    StreamCursor(stream).read(begin, length, out);
    return out;
}

TensorPiece whole_stream_piece(std::vector<SourceExtent> stream, std::uint64_t offset) {
    TensorPiece piece;
    piece.row_bytes = stream_bytes(stream);
    piece.stride = piece.row_bytes;
    piece.source_stride = piece.row_bytes;
    piece.offset = offset;
    piece.sources.push_back(std::move(stream));
    return piece;
}

void check_pieces(const std::vector<TensorPiece>& pieces, std::uint64_t tensor_bytes,
                  const std::string& tensor) {
    auto fail = [&](const std::string& what) {
        throw_internal_error("pieces of tensor '" + tensor + "': " + what);
    };
    // Row ranges as (begin, end) pairs; rows of one piece never overlap each other when
    // stride >= row_bytes, checked below, so sorting piece-row starts finds every overlap.
    std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
    for (const TensorPiece& piece : pieces) {
        if (piece.sources.empty()) {
            fail("a piece without a source");
        }
        if (piece.combine == PieceCombine::kCopy && piece.sources.size() != 1) {
            fail("a copied piece with several sources");
        }
        if (piece.rows == 0 || piece.row_bytes == 0) {
            continue;
        }
        if (piece.rows > 1 &&
            (piece.stride < piece.row_bytes || piece.source_stride < piece.row_bytes)) {
            fail("rows overlap");
        }
        const std::uint64_t last = piece.rows - 1;
        const std::uint64_t source_end =
            piece.source_offset + last * piece.source_stride + piece.row_bytes;
        for (const auto& source : piece.sources) {
            if (stream_bytes(source) < source_end) {
                fail("a source shorter than its rows");
            }
            if (stream_bytes(source) != stream_bytes(piece.sources.front())) {
                fail("replicas of different lengths");
            }
        }
        if (piece.offset + last * piece.stride + piece.row_bytes > tensor_bytes) {
            fail("rows past the end of the tensor");
        }
        for (std::uint64_t i = 0; i < piece.rows; ++i) {
            ranges.emplace_back(piece.offset + i * piece.stride,
                                piece.offset + i * piece.stride + piece.row_bytes);
        }
    }
    std::sort(ranges.begin(), ranges.end());
    std::uint64_t covered = 0;
    for (const auto& [begin, end] : ranges) {
        if (begin != covered) {
            fail(begin < covered ? "pieces overlap at byte " + std::to_string(begin)
                                 : "bytes " + std::to_string(covered) + " to " +
                                       std::to_string(begin) + " are not covered");
        }
        covered = end;
    }
    if (covered != tensor_bytes) {
        fail("covers " + std::to_string(covered) + " of " + std::to_string(tensor_bytes) +
             " bytes");
    }
}

bool flattenable(const std::vector<TensorPiece>& pieces) {
    return std::none_of(pieces.begin(), pieces.end(), [](const TensorPiece& piece) {
        return piece.combine == PieceCombine::kAverage && piece.sources.size() > 1;
    });
}

std::vector<std::vector<SourceExtent>> averaged_replicas(const std::vector<TensorPiece>& pieces,
                                                         std::uint64_t tensor_bytes) {
    if (pieces.size() != 1 || pieces[0].combine != PieceCombine::kAverage ||
        pieces[0].sources.size() < 2)
        return {};
    const TensorPiece& piece = pieces[0];
    const bool contiguous = piece.rows <= 1 || (piece.stride == piece.row_bytes &&
                                                piece.source_stride == piece.row_bytes);
    if (piece.offset != 0 || !contiguous || piece.row_bytes * piece.rows != tensor_bytes)
        return {};
    std::vector<std::vector<SourceExtent>> replicas;
    for (const std::vector<SourceExtent>& source : piece.sources)
        replicas.push_back(slice_stream(source, piece.source_offset, tensor_bytes));
    return replicas;
}

std::vector<SourceExtent> flatten_pieces(const std::vector<TensorPiece>& pieces,
                                         std::uint64_t tensor_bytes, const std::string& tensor) {
    return flatten_piece_range(pieces, 0, tensor_bytes, tensor);
}

std::vector<SourceExtent> flatten_piece_range(const std::vector<TensorPiece>& pieces,
                                              std::uint64_t begin, std::uint64_t end,
                                              const std::string& tensor) {
    if (!flattenable(pieces)) {
        throw_internal_error("tensor '" + tensor + "' averages replicas: no flat extent list");
    }
    if (begin > end) {
        throw_internal_error("tensor '" + tensor + "': an empty range ends before it begins");
    }
    if (begin == end) {
        return {};
    }
    // The parts of rows inside [begin, end): tensor offset, piece, stream offset, length.
    struct Row {
        std::uint64_t offset;
        std::size_t piece;
        std::uint64_t source;
        std::uint64_t length;
    };
    std::vector<Row> rows;
    for (std::size_t p = 0; p < pieces.size(); ++p) {
        const TensorPiece& piece = pieces[p];
        if (piece.row_bytes == 0 || piece.rows == 0) {
            continue;
        }
        // Rows first..last-1 touch the range: row i spans [offset + i * stride, + row_bytes).
        std::uint64_t first = 0;
        std::uint64_t last = piece.rows;
        if (piece.rows > 1) {
            if (piece.stride == 0) {
                throw_internal_error("pieces of tensor '" + tensor + "' repeat a row");
            }
            if (begin >= piece.offset + piece.row_bytes) {
                first = (begin - piece.offset - piece.row_bytes) / piece.stride + 1;
            }
            last =
                end <= piece.offset
                    ? 0
                    : std::min(piece.rows, (end - piece.offset + piece.stride - 1) / piece.stride);
        }
        for (std::uint64_t i = first; i < last; ++i) {
            const std::uint64_t row_begin = piece.offset + i * piece.stride;
            const std::uint64_t from = std::max(begin, row_begin);
            const std::uint64_t to = std::min(end, row_begin + piece.row_bytes);
            if (to <= from) {
                continue;
            }
            rows.push_back({from, p,
                            piece.source_offset + i * piece.source_stride + (from - row_begin),
                            to - from});
        }
    }
    std::sort(rows.begin(), rows.end(),
              [](const Row& a, const Row& b) { return a.offset < b.offset; });
    std::vector<StreamCursor> cursors;
    cursors.reserve(pieces.size());
    for (const TensorPiece& piece : pieces) {
        cursors.emplace_back(piece.sources.front());
    }
    std::vector<SourceExtent> out;
    std::uint64_t covered = begin;
    for (const Row& row : rows) {
        if (row.offset != covered) {
            throw_internal_error("pieces of tensor '" + tensor + "' leave a gap or overlap");
        }
        cursors[row.piece].read(row.source, row.length, out);
        covered += row.length;
    }
    if (covered != end) {
        throw_internal_error("pieces of tensor '" + tensor + "' cover " +
                             std::to_string(covered - begin) + " of bytes [" +
                             std::to_string(begin) + ", " + std::to_string(end) + ")");
    }
    return out;
}

bool flat_is_compact(const std::vector<TensorPiece>& pieces) {
    return std::all_of(pieces.begin(), pieces.end(), [](const TensorPiece& piece) {
        return piece.rows <= 1 ||
               (piece.stride == piece.row_bytes && piece.source_stride == piece.row_bytes);
    });
}

}  // namespace z2f::plan
