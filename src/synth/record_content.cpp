#include "synth/record_content.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <string>

#include "common/errors.hpp"
#include "synth/value_function.hpp"

namespace z2f::synth {

void RecordContent::add(Segment segment) {
    if (segment.count == 0) {
        return;
    }
    // Adjacent zero runs merge: partitions end in padding that may meet the next param's.
    if (segment.fill == Segment::Fill::kZeros && !segments_.empty() &&
        segments_.back().fill == Segment::Fill::kZeros) {
        segments_.back().count += segment.count;
    } else {
        starts_.push_back(numel_);
        segments_.push_back(segment);
    }
    numel_ += segment.count;
}

void RecordContent::add_values(std::uint64_t key, std::uint64_t first, std::uint64_t count) {
    add({Segment::Fill::kValues, count, key, first});
}

void RecordContent::add_zeros(std::uint64_t count) {
    add({Segment::Fill::kZeros, count, 0, 0});
}

void RecordContent::add_arange(std::uint64_t first, std::uint64_t count) {
    if (dtype_ != DType::kI64) {
        throw_internal_error("synth: arange segments are int64 only");
    }
    add({Segment::Fill::kArange, count, 0, first});
}

void RecordContent::add_constant_f32(float value, std::uint64_t count) {
    if (dtype_ != DType::kF32) {
        throw_internal_error("synth: constant segments are fp32 only");
    }
    add({Segment::Fill::kConstant, count, std::bit_cast<std::uint32_t>(value), 0});
}

void RecordContent::produce(std::uint64_t offset, std::span<std::byte> out) const {
    const std::uint64_t item = dtype_size(dtype_);
    if (offset % item != 0 || out.size() % item != 0 || offset + out.size() > size_bytes()) {
        throw_internal_error("synth: record range [" + std::to_string(offset) + ", +" +
                             std::to_string(out.size()) + ") not on elements of the record");
    }
    std::uint64_t element = offset / item;
    std::uint64_t remaining = out.size() / item;
    // The segment holding `element`: the last one starting at or before it.
    auto it = std::upper_bound(starts_.begin(), starts_.end(), element);
    std::size_t s = static_cast<std::size_t>(it - starts_.begin()) - 1;
    std::byte* cursor = out.data();
    while (remaining > 0) {
        const Segment& segment = segments_[s];
        std::uint64_t within = element - starts_[s];
        std::uint64_t n = std::min(remaining, segment.count - within);
        std::span<std::byte> piece(cursor, static_cast<std::size_t>(n * item));
        switch (segment.fill) {
            case Segment::Fill::kValues:
                fill_values(segment.key, segment.first + within, dtype_, piece);
                break;
            case Segment::Fill::kZeros:
                std::memset(piece.data(), 0, piece.size());
                break;
            case Segment::Fill::kArange:
                fill_arange_i64(segment.first + within, piece);
                break;
            case Segment::Fill::kConstant: {
                auto bits = static_cast<std::uint32_t>(segment.key);
                for (std::size_t i = 0; i < piece.size(); i += sizeof bits) {
                    std::memcpy(piece.data() + i, &bits, sizeof bits);
                }
                break;
            }
        }
        cursor += piece.size();
        element += n;
        remaining -= n;
        ++s;
    }
}

}  // namespace z2f::synth
