// Reading a file range through a private read-only mapping, with SIGBUS turned into an error.
//
// A mapping hands out page-cache pages without copying them into a buffer, so converting or
// checksumming straight from it saves a copy. Its danger: if the file shrinks while mapped,
// touching a page past the new end raises SIGBUS. `with_mapped_range` maps just the requested
// range (callers keep it within --buffer-size), runs the consumer under a SIGBUS guard, and
// unmaps; a SIGBUS inside the consumer becomes an input error naming the file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>

#include "io/posix_file.hpp"

namespace z2f::io {

void with_mapped_range(const File& file, std::uint64_t offset, std::uint64_t length,
                       const std::function<void(std::span<const std::byte>)>& consume);

}  // namespace z2f::io
