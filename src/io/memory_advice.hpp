// Advice to the kernel about fresh memory this process is about to fill: the tensors a
// Python caller allocates for the in-memory reader (driver/state_dict_reader.cpp).
//
// Why: the first write to each page of fresh anonymous memory faults, and on the development
// VM a fault costs 17-28 us (a trap out of the guest): writing 800 MB of new tensor memory
// took 3.3-5.5 s. Asking for the pages first in one call (MADV_POPULATE_WRITE, Linux 5.14)
// took 0.03-0.16 s for the same 800 MB, and transparent huge pages (MADV_HUGEPAGE; THP's
// "madvise" mode is Debian's default) make the pages 512 times fewer.
#pragma once

#include <cstddef>
#include <span>

namespace z2f::io {

// MADV_HUGEPAGE on the whole 2 MiB pages inside `memory` (none for less than that).
void advise_huge_pages(std::span<std::byte> memory) noexcept;

// MADV_POPULATE_WRITE on the pages `memory` touches: each present and writable afterwards, as
// if written to, contents unchanged. Before advise_huge_pages' advice it takes 4 KiB pages.
void populate_for_writing(std::span<std::byte> memory) noexcept;

// Both are advisory: a kernel or mapping that refuses them (EINVAL on kernels before 5.14,
// THP off) changes nothing, and the memory is then faulted in as it is written.

}  // namespace z2f::io
