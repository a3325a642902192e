#include "support/piece_reader.hpp"

#include <cmath>
#include <cstring>
#include <stdexcept>

#include "support/expected_state.hpp"

namespace z2f::testing {
namespace {

std::vector<std::byte> read_stream(const plan::TensorPlan& plan,
                                   const std::vector<SourceExtent>& stream) {
    std::vector<std::byte> bytes;
    for (const SourceExtent& extent : stream) {
        auto part = read_range(plan.inputs.at(extent.file).path, extent.offset, extent.length);
        bytes.insert(bytes.end(), part.begin(), part.end());
    }
    return bytes;
}

float f32_at(const std::vector<std::byte>& bytes, std::size_t at) {
    float value;
    std::memcpy(&value, &bytes[at], 4);
    return value;
}

}  // namespace

PieceResult read_pieces(const plan::TensorPlan& plan, const plan::PlannedTensor& tensor,
                        const std::vector<plan::TensorPiece>& pieces) {
    PieceResult result;
    result.bytes.resize(tensor.source_bytes());
    for (const plan::TensorPiece& piece : pieces) {
        std::vector<std::vector<std::byte>> streams;
        for (const auto& source : piece.sources) {
            streams.push_back(read_stream(plan, source));
        }
        for (std::uint64_t i = 0; i < piece.rows; ++i) {
            const std::size_t from = piece.source_offset + i * piece.source_stride;
            const std::size_t to = piece.offset + i * piece.stride;
            if (from + piece.row_bytes > streams.front().size() ||
                to + piece.row_bytes > result.bytes.size()) {
                throw std::runtime_error(tensor.name + ": a piece row out of range");
            }
            std::memcpy(&result.bytes[to], &streams.front()[from], piece.row_bytes);
            if (piece.combine == plan::PieceCombine::kCheckEqual) {
                for (std::size_t s = 1; s < streams.size(); ++s) {
                    if (std::memcmp(&streams[s][from], &streams[0][from], piece.row_bytes) == 0) {
                        continue;
                    }
                    if (result.mismatch.empty()) {
                        result.mismatch = tensor.name + ": replica " + std::to_string(s) +
                                          " differs from replica 0";
                    }
                    if (tensor.source_dtype == DType::kF32) {
                        for (std::size_t b = 0; b + 4 <= piece.row_bytes; b += 4) {
                            double d = std::fabs(static_cast<double>(f32_at(streams[s], from + b)) -
                                                 static_cast<double>(f32_at(streams[0], from + b)));
                            result.largest_difference = std::max(result.largest_difference, d);
                        }
                    }
                }
            } else if (piece.combine == plan::PieceCombine::kAverage) {
                if (tensor.source_dtype != DType::kF32) {
                    throw std::runtime_error("read_pieces: averaging implemented for fp32 only");
                }
                for (std::size_t b = 0; b + 4 <= piece.row_bytes; b += 4) {
                    float sum = 0.0f;
                    for (const auto& stream : streams) {
                        sum += f32_at(stream, from + b);
                    }
                    float mean = sum / static_cast<float>(streams.size());
                    std::memcpy(&result.bytes[to + b], &mean, 4);
                }
            }
        }
    }
    return result;
}

}  // namespace z2f::testing
