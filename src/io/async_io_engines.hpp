// The two AsyncIo engines behind make_async_io (async_io.hpp); private to src/io.
#pragma once

#include <cstddef>
#include <memory>

#include "io/async_io.hpp"

namespace z2f::io {

// nullptr where the kernel refuses an io_uring (ENOSYS, EPERM, ENOMEM for the ring).
std::unique_ptr<AsyncIo> make_uring_async_io(std::size_t depth);
std::unique_ptr<AsyncIo> make_threaded_async_io(std::size_t depth);

}  // namespace z2f::io
