#include "io/async_io.hpp"

#include "common/errors.hpp"
#include "io/async_io_engines.hpp"

namespace z2f::io {

const char* io_engine_name(IoEngine engine) noexcept {
    return engine == IoEngine::kIoUring ? "io_uring" : "threads";
}

std::unique_ptr<AsyncIo> make_async_io(IoEngine engine, std::size_t depth) {
    if (depth == 0) {
        throw_internal_error("make_async_io: depth 0");
    }
    if (engine == IoEngine::kIoUring) {
        if (auto ring = make_uring_async_io(depth)) {
            return ring;
        }
    }
    return make_threaded_async_io(depth);
}

}  // namespace z2f::io
