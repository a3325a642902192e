#include "plan/tensor_plan.hpp"

namespace z2f::plan {

std::uint64_t PlannedTensor::numel() const noexcept {
    std::uint64_t count = 1;
    for (std::uint64_t dim : shape) {
        count *= dim;  // overflow is ruled out when shapes are read (checkpoint interpretation)
    }
    return count;
}

}  // namespace z2f::plan
