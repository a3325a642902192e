// The io_uring engine of a build configured without liburing (cmake/Dependencies.cmake): it
// declines every ring, so make_async_io gives the threaded engine, as it does where the kernel
// refuses io_uring.
#include "io/async_io_engines.hpp"

namespace z2f::io {

bool io_uring_built_in() noexcept {
    return false;
}

std::unique_ptr<AsyncIo> make_uring_async_io(std::size_t /*depth*/) {
    return nullptr;
}

}  // namespace z2f::io
