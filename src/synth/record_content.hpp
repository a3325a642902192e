// The bytes of one storage record of a synthetic checkpoint, described rather than held: a
// list of segments, each a run of elements that are either values of one tensor (see
// value_function.hpp), zeros (padding), or 0, 1, 2, ... (position_ids). Any byte range of the
// record is produced on demand, so a multi-GB partition streams through a few MB of memory.
//
// A record may also be a hole: zeros that are never written (sparse files, --sparse).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "common/dtype.hpp"

namespace z2f::synth {

struct Segment {
    enum class Fill : std::uint8_t { kValues, kZeros, kArange, kConstant };
    Fill fill = Fill::kZeros;
    std::uint64_t count = 0;  // elements
    std::uint64_t key = 0;    // kValues: the tensor's value_key; kConstant: the element's bits
    std::uint64_t first = 0;  // kValues / kArange: index of the segment's first element
};

class RecordContent {
  public:
    explicit RecordContent(DType dtype = DType::kF32) : dtype_(dtype) {}

    DType dtype() const noexcept { return dtype_; }
    std::uint64_t numel() const noexcept { return numel_; }
    std::uint64_t size_bytes() const noexcept { return numel_ * dtype_size(dtype_); }
    bool hole() const noexcept { return hole_; }
    void set_hole(bool hole) noexcept { hole_ = hole; }

    void add_values(std::uint64_t key, std::uint64_t first, std::uint64_t count);
    void add_zeros(std::uint64_t count);
    void add_arange(std::uint64_t first, std::uint64_t count);
    // `count` copies of one fp32 value (the optimizer's step counter). fp32 records only.
    void add_constant_f32(float value, std::uint64_t count);

    // Writes bytes [offset, offset + out.size()) of the record. Both must be multiples of the
    // element size.
    void produce(std::uint64_t offset, std::span<std::byte> out) const;

  private:
    void add(Segment segment);

    DType dtype_;
    std::uint64_t numel_ = 0;
    bool hole_ = false;
    std::vector<Segment> segments_;
    std::vector<std::uint64_t> starts_;  // first element of each segment
};

}  // namespace z2f::synth
