// AsyncIo on one io_uring (liburing). Every request is submitted at once (one io_uring_enter
// per request: with multi-MiB transfers that is a few hundred calls per GB) and completions are
// reaped one by one. The ring has exactly `depth` entries and at most `depth` requests are in
// flight, so neither the submission nor the completion ring can overflow.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <liburing.h>
#include <utility>
#include <vector>

#include "common/errors.hpp"
#include "io/async_io_engines.hpp"
#include "io/call_hook.hpp"
#include "io/posix_file.hpp"

namespace z2f::io {
namespace {

class UringAsyncIo final : public AsyncIo {
  public:
    explicit UringAsyncIo(std::size_t depth) : depth_(depth) {}
    ~UringAsyncIo() override;

    // -errno when the kernel refuses the ring.
    int init();

    void submit(const IoRequest& request) override;
    IoCompletion wait_one() override;
    std::optional<IoCompletion> poll_one() override;
    std::size_t in_flight() const noexcept override { return in_flight_; }
    std::size_t depth() const noexcept override { return depth_; }
    IoEngine engine() const noexcept override { return IoEngine::kIoUring; }

  private:
    // The completion of `cqe`, with the result of a kSizeAndSync whose ftruncate failed.
    IoCompletion completion_of(const io_uring_cqe* cqe);

    std::size_t depth_;
    std::size_t in_flight_ = 0;
    bool initialised_ = false;
    io_uring ring_{};
    // Tags of kSizeAndSync requests whose ftruncate failed (their entry is a no-op), -errno.
    std::vector<std::pair<std::uint64_t, std::int64_t>> failed_sizes_;
};

int UringAsyncIo::init() {
    const auto entries = static_cast<unsigned>(depth_);
    // Only this thread submits, and completions are reaped when it waits: tell the kernel, so
    // that it skips the cross-thread signalling (Linux 6.0+; refused with EINVAL before).
    int rc = io_uring_queue_init(entries, &ring_,
                                 IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_COOP_TASKRUN);
    if (rc == -EINVAL) {
        rc = io_uring_queue_init(entries, &ring_, 0);
    }
    initialised_ = rc == 0;
    return rc;
}

UringAsyncIo::~UringAsyncIo() {
    if (!initialised_) {
        return;
    }
    // The kernel may still be reading from or writing into the callers' buffers: wait for
    // every request before the ring (and then the buffers) go away.
    while (in_flight_ > 0) {
        io_uring_cqe* cqe = nullptr;
        int rc = io_uring_wait_cqe(&ring_, &cqe);
        if (rc == -EINTR) {
            continue;
        }
        if (rc != 0) {
            break;  // a broken ring: nothing more will complete
        }
        io_uring_cqe_seen(&ring_, cqe);
        --in_flight_;
    }
    io_uring_queue_exit(&ring_);
}

void UringAsyncIo::submit(const IoRequest& request) {
    if (in_flight_ >= depth_) {
        throw_internal_error("io_uring: more requests than its depth");
    }
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) {
        throw_internal_error("io_uring: no free submission entry");
    }
    auto length = static_cast<unsigned>(request.length);
    // The call hook (call_hook.hpp) sees each request as the thread engine's call would be.
    const IoCall call = request.direction == IoDirection::kWrite  ? IoCall::kWrite
                        : request.direction == IoDirection::kRead ? IoCall::kRead
                                                                  : IoCall::kSync;
    std::int64_t failed = 0;
    if (request.direction == IoDirection::kSizeAndSync)
        failed = request.file->truncate_once(request.offset);
    if (failed == 0) {
        if (const CallFault fault = call_fault(call, request.file->path()); fault.error != 0)
            failed = -fault.error;
        else if (fault.shorten)
            length = static_cast<unsigned>(shortened_length(request.file->fd(), length));
    }
    if (failed < 0) {
        failed_sizes_.emplace_back(request.tag, failed);
        io_uring_prep_nop(sqe);  // the failure is reported as its completion
    } else {
        switch (request.direction) {
            case IoDirection::kWrite:
                io_uring_prep_write(sqe, request.file->fd(), request.buffer, length,
                                    request.offset);
                break;
            case IoDirection::kRead:
                io_uring_prep_read(sqe, request.file->fd(), request.buffer, length, request.offset);
                break;
            case IoDirection::kSyncData:
            case IoDirection::kSizeAndSync:
                io_uring_prep_fsync(sqe, request.file->fd(), IORING_FSYNC_DATASYNC);
                break;
        }
    }
    io_uring_sqe_set_data64(sqe, request.tag);
    int rc;
    do {
        rc = io_uring_submit(&ring_);
    } while (rc == -EINTR);
    if (rc < 0) {
        throw_io_error("cannot submit I/O (io_uring) for", request.file->path(), -rc);
    }
    ++in_flight_;
}

IoCompletion UringAsyncIo::wait_one() {
    if (in_flight_ == 0) {
        throw_internal_error("io_uring: wait with nothing in flight");
    }
    io_uring_cqe* cqe = nullptr;
    int rc;
    do {
        rc = io_uring_wait_cqe(&ring_, &cqe);
    } while (rc == -EINTR);
    if (rc != 0) {
        throw_io_error("cannot wait for I/O (io_uring)", "", -rc);
    }
    IoCompletion completion = completion_of(cqe);
    io_uring_cqe_seen(&ring_, cqe);
    --in_flight_;
    return completion;
}

IoCompletion UringAsyncIo::completion_of(const io_uring_cqe* cqe) {
    IoCompletion completion{io_uring_cqe_get_data64(cqe), cqe->res};
    auto failed = std::find_if(failed_sizes_.begin(), failed_sizes_.end(),
                               [&](const auto& entry) { return entry.first == completion.tag; });
    if (failed != failed_sizes_.end()) {
        completion.result = failed->second;
        failed_sizes_.erase(failed);
    }
    return completion;
}

std::optional<IoCompletion> UringAsyncIo::poll_one() {
    if (in_flight_ == 0)
        return std::nullopt;
    io_uring_cqe* cqe = nullptr;
    if (io_uring_peek_cqe(&ring_, &cqe) != 0 || cqe == nullptr)
        return std::nullopt;
    IoCompletion completion = completion_of(cqe);
    io_uring_cqe_seen(&ring_, cqe);
    --in_flight_;
    return completion;
}

}  // namespace

bool io_uring_built_in() noexcept {
    return true;
}

std::unique_ptr<AsyncIo> make_uring_async_io(std::size_t depth) {
    auto ring = std::make_unique<UringAsyncIo>(depth);
    if (ring->init() != 0) {
        return nullptr;
    }
    return ring;
}

}  // namespace z2f::io
