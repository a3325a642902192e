// A heap buffer whose address and size are multiples of an alignment: what O_DIRECT transfers
// need (the file system's memory alignment, at least the page size, so that a buffer never
// shares a page with other data).
//
// Large buffers may ask for transparent huge pages. Why: a direct transfer from huge pages
// completed 1.5-2x sooner on the development VM's virtio disk (docs/io-engine.md: the same
// requests reach the device, each memory segment costs behind it). With THP in "madvise" mode
// (Debian's default) the hint is needed.
#pragma once

#include <cstddef>
#include <memory>
#include <span>

namespace z2f::io {

class AlignedBuffer {
  public:
    AlignedBuffer() = default;
    // `size` is rounded up to a multiple of `alignment` (a power of two). With `huge_pages` and
    // a size of at least 2 MiB, the buffer is 2 MiB-aligned and advised to use huge pages
    // (madvise MADV_HUGEPAGE; advisory). Not zero-filled: the callers write every byte they
    // send. Throws std::bad_alloc.
    AlignedBuffer(std::size_t alignment, std::size_t size, bool huge_pages = false);

    std::byte* data() const noexcept { return data_.get(); }
    std::size_t size() const noexcept { return size_; }
    std::span<std::byte> span() const noexcept { return {data_.get(), size_}; }

  private:
    struct Free {
        void operator()(std::byte* pointer) const noexcept;
    };
    std::size_t size_ = 0;
    std::unique_ptr<std::byte, Free> data_;
};

}  // namespace z2f::io
