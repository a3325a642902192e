#include "plan/tensor_plan.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "common/errors.hpp"

namespace z2f::plan {

std::uint64_t PlannedTensor::numel() const noexcept {
    std::uint64_t count = 1;
    for (std::uint64_t dim : shape) {
        count *= dim;  // overflow is ruled out when shapes are read (checkpoint interpretation)
    }
    return count;
}

std::vector<SourceExtent> sub_extents(const std::vector<SourceExtent>& extents, std::uint64_t begin,
                                      std::uint64_t end) {
    std::vector<SourceExtent> part;
    std::uint64_t position = 0;  // of the current extent in the concatenation
    for (const SourceExtent& extent : extents) {
        const std::uint64_t from = std::max(begin, position);
        const std::uint64_t to = std::min(end, position + extent.length);
        if (to > from)
            part.push_back({extent.file, extent.offset + (from - position), to - from});
        position += extent.length;
        if (position >= end)
            break;
    }
    if (end > position || begin > end)
        throw_internal_error("bytes [" + std::to_string(begin) + ", " + std::to_string(end) +
                             ") of extents holding " + std::to_string(position));
    return part;
}

namespace {

// Source bytes [begin, end) of output bytes [skip, skip + length): whole elements only.
std::pair<std::uint64_t, std::uint64_t> source_range(const PlannedTensor& tensor,
                                                     std::uint64_t skip, std::uint64_t length) {
    const std::uint64_t out_item = dtype_size(tensor.output_dtype);
    const std::uint64_t in_item = dtype_size(tensor.source_dtype);
    if (skip % out_item != 0 || length % out_item != 0)
        throw_internal_error("a write task splits an element of '" + tensor.name + "'");
    return {skip / out_item * in_item, (skip + length) / out_item * in_item};
}

}  // namespace

std::vector<SourceExtent> part_extents(const PlannedTensor& tensor, std::uint64_t skip,
                                       std::uint64_t length) {
    if (!tensor.extents_from_pieces())
        return part_extents(tensor, tensor.extents, skip, length);
    const auto [begin, end] = source_range(tensor, skip, length);
    return flatten_piece_range(tensor.pieces, begin, end, tensor.name);
}

std::vector<SourceExtent> part_extents(const PlannedTensor& tensor,
                                       const std::vector<SourceExtent>& stream, std::uint64_t skip,
                                       std::uint64_t length) {
    const auto [begin, end] = source_range(tensor, skip, length);
    return sub_extents(stream, begin, end);
}

std::vector<SourceExtent> source_extents(const PlannedTensor& tensor) {
    if (tensor.extents_from_pieces())
        return flatten_pieces(tensor.pieces, tensor.source_bytes(), tensor.name);
    return tensor.extents;
}

}  // namespace z2f::plan
