// AsyncIo on a pool of `depth` worker threads, each doing one blocking pread/pwrite/fdatasync
// at a time:
// the portable engine, and the fallback where io_uring is refused.
#include <condition_variable>
#include <csignal>
#include <deque>
#include <mutex>
#include <pthread.h>
#include <thread>
#include <vector>

#include "common/errors.hpp"
#include "io/async_io_engines.hpp"
#include "io/posix_file.hpp"

namespace z2f::io {
namespace {

class ThreadedAsyncIo final : public AsyncIo {
  public:
    explicit ThreadedAsyncIo(std::size_t depth);
    ~ThreadedAsyncIo() override;

    void submit(const IoRequest& request) override;
    IoCompletion wait_one() override;
    std::optional<IoCompletion> poll_one() override;
    std::size_t in_flight() const noexcept override { return in_flight_; }
    std::size_t depth() const noexcept override { return depth_; }
    IoEngine engine() const noexcept override { return IoEngine::kThreads; }

  private:
    void run();

    std::size_t depth_;
    std::size_t in_flight_ = 0;  // owner thread only
    std::mutex mutex_;
    std::condition_variable work_;  // workers wait here
    std::condition_variable done_;  // the owner waits here
    std::deque<IoRequest> queued_;
    std::deque<IoCompletion> completed_;
    bool stop_ = false;
    std::vector<std::thread> workers_;
};

ThreadedAsyncIo::ThreadedAsyncIo(std::size_t depth) : depth_(depth) {
    workers_.reserve(depth);
    try {
        for (std::size_t i = 0; i < depth; ++i) {
            workers_.emplace_back([this] { run(); });
        }
    } catch (...) {
        {
            std::lock_guard lock(mutex_);
            stop_ = true;
        }
        work_.notify_all();
        for (auto& worker : workers_) {
            worker.join();
        }
        throw;
    }
}

ThreadedAsyncIo::~ThreadedAsyncIo() {
    {
        std::lock_guard lock(mutex_);
        stop_ = true;
        queued_.clear();  // not started: dropped; the running ones finish their call
    }
    work_.notify_all();
    for (auto& worker : workers_) {
        worker.join();
    }
}

void ThreadedAsyncIo::submit(const IoRequest& request) {
    if (in_flight_ >= depth_) {
        throw_internal_error("I/O threads: more requests than threads");
    }
    {
        std::lock_guard lock(mutex_);
        queued_.push_back(request);
    }
    ++in_flight_;
    work_.notify_one();
}

IoCompletion ThreadedAsyncIo::wait_one() {
    if (in_flight_ == 0) {
        throw_internal_error("I/O threads: wait with nothing in flight");
    }
    std::unique_lock lock(mutex_);
    done_.wait(lock, [this] { return !completed_.empty(); });
    IoCompletion completion = completed_.front();
    completed_.pop_front();
    --in_flight_;
    return completion;
}

std::optional<IoCompletion> ThreadedAsyncIo::poll_one() {
    std::lock_guard lock(mutex_);
    if (completed_.empty())
        return std::nullopt;
    IoCompletion completion = completed_.front();
    completed_.pop_front();
    --in_flight_;
    return completion;
}

void ThreadedAsyncIo::run() {
    // Termination signals must reach the threads that check for them, never an I/O worker.
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);

    std::unique_lock lock(mutex_);
    while (true) {
        work_.wait(lock, [this] { return stop_ || !queued_.empty(); });
        if (stop_) {
            return;
        }
        IoRequest request = queued_.front();
        queued_.pop_front();
        lock.unlock();
        std::int64_t result = 0;
        switch (request.direction) {
            case IoDirection::kWrite:
                result = request.file->write_once(
                    request.offset, std::span<const std::byte>(request.buffer, request.length));
                break;
            case IoDirection::kRead:
                result = request.file->read_once(
                    request.offset, std::span<std::byte>(request.buffer, request.length));
                break;
            case IoDirection::kSyncData:
                result = request.file->sync_data_once();
                break;
            case IoDirection::kSizeAndSync:
                result = request.file->truncate_once(request.offset);
                if (result == 0)
                    result = request.file->sync_data_once();
                break;
        }
        lock.lock();
        completed_.push_back({request.tag, result});
        done_.notify_one();
    }
}

}  // namespace

std::unique_ptr<AsyncIo> make_threaded_async_io(std::size_t depth) {
    return std::make_unique<ThreadedAsyncIo>(depth);
}

}  // namespace z2f::io
