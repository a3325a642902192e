// A heap buffer whose address and size are multiples of an alignment: what O_DIRECT transfers
// need (the file system's memory alignment, rounded up to the page size by the callers so that
// one buffer never shares a page with other data).
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>
#include <span>

namespace z2f::io {

class AlignedBuffer {
  public:
    AlignedBuffer() = default;
    // `size` is rounded up to a multiple of `alignment` (a power of two). Not zero-filled: the
    // callers write every byte they send. Throws std::bad_alloc.
    AlignedBuffer(std::size_t alignment, std::size_t size)
        : size_((size + alignment - 1) / alignment * alignment),
          data_(static_cast<std::byte*>(
              std::aligned_alloc(alignment, size_ == 0 ? alignment : size_))) {
        if (data_ == nullptr) {
            throw std::bad_alloc();
        }
    }

    std::byte* data() const noexcept { return data_.get(); }
    std::size_t size() const noexcept { return size_; }
    std::span<std::byte> span() const noexcept { return {data_.get(), size_}; }

  private:
    struct Free {
        void operator()(std::byte* pointer) const noexcept { std::free(pointer); }
    };
    std::size_t size_ = 0;
    std::unique_ptr<std::byte, Free> data_;
};

}  // namespace z2f::io
