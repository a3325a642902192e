#include "io/memory_advice.hpp"

#include <cstdint>

#include <sys/mman.h>

// Linux 5.14's value, for C libraries older than the kernel they run on.
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace z2f::io {
namespace {

constexpr std::uintptr_t kPage = 4096;
constexpr std::uintptr_t kHugePage = std::uintptr_t{2} << 20;

void advise(std::uintptr_t first, std::uintptr_t last, int advice) noexcept {
    if (last > first)
        (void)::madvise(reinterpret_cast<void*>(first), last - first, advice);
}

}  // namespace

void advise_huge_pages(std::span<std::byte> memory) noexcept {
    const auto begin = reinterpret_cast<std::uintptr_t>(memory.data());
    advise((begin + kHugePage - 1) / kHugePage * kHugePage,
           (begin + memory.size()) / kHugePage * kHugePage, MADV_HUGEPAGE);
}

void populate_for_writing(std::span<std::byte> memory) noexcept {
    if (memory.empty())
        return;
    const auto begin = reinterpret_cast<std::uintptr_t>(memory.data());
    advise(begin / kPage * kPage, (begin + memory.size() + kPage - 1) / kPage * kPage,
           MADV_POPULATE_WRITE);
}

}  // namespace z2f::io
