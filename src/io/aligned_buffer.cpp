#include "io/aligned_buffer.hpp"

#include <cstdlib>
#include <new>

#include <sys/mman.h>

namespace z2f::io {
namespace {

constexpr std::size_t kHugePage = std::size_t{2} << 20;

}  // namespace

AlignedBuffer::AlignedBuffer(std::size_t alignment, std::size_t size, bool huge_pages) {
    const bool huge = huge_pages && size >= kHugePage && alignment <= kHugePage;
    const std::size_t unit = huge ? kHugePage : alignment;
    size_ = (size + alignment - 1) / alignment * alignment;
    const std::size_t allocated = size_ == 0 ? unit : (size_ + unit - 1) / unit * unit;
    data_.reset(static_cast<std::byte*>(std::aligned_alloc(unit, allocated)));
    if (!data_) {
        throw std::bad_alloc();
    }
    if (huge) {
        (void)::madvise(data_.get(), allocated, MADV_HUGEPAGE);  // a hint: refused is fine
    }
}

void AlignedBuffer::Free::operator()(std::byte* pointer) const noexcept {
    std::free(pointer);
}

}  // namespace z2f::io
