#include "io/write_behind.hpp"

#include <algorithm>
#include <optional>
#include <signal.h>

namespace z2f::io {

WriteBehind::~WriteBehind() {
    abandon();
    {
        std::unique_lock lock(mutex_);
        // Input drops are advisory but cheap to finish: leave the cache as the copy meant to.
        done_.wait(lock, [&] { return drops_.empty() || !thread_.joinable(); });
        stop_ = true;
    }
    work_.notify_all();
    if (thread_.joinable()) {
        thread_.join();
    }
}

void WriteBehind::start(const File& file) {
    std::unique_lock lock(mutex_);
    // A step of the previous file may still be running (after its error was rethrown).
    done_.wait(lock, [&] { return !busy_; });
    file_ = &file;
    queued_.clear();
    started_.clear();
    pending_ = 0;
    retired_since_sync_ = 0;
    error_ = nullptr;
    window_begin_ = UINT64_MAX;
    window_end_ = 0;
    if (!thread_.joinable()) {
        thread_ = std::thread([this] { run(); });
    }
}

void WriteBehind::written(std::uint64_t offset, std::uint64_t length) {
    window_begin_ = std::min(window_begin_, offset);
    window_end_ = std::max(window_end_, offset + length);
    if (window_end_ - window_begin_ < kWindowBytes) {
        return;
    }
    std::unique_lock lock(mutex_);
    throw_if_failed_locked();
    hand_over_locked({window_begin_, window_end_ - window_begin_});
    window_begin_ = UINT64_MAX;
    window_end_ = 0;
    done_.wait(lock, [&] { return pending_ < kMaxPendingBytes || error_; });
    throw_if_failed_locked();
}

void WriteBehind::finish() {
    std::unique_lock lock(mutex_);
    if (window_end_ > window_begin_) {
        hand_over_locked({window_begin_, window_end_ - window_begin_});
    }
    window_begin_ = UINT64_MAX;
    window_end_ = 0;
    finishing_ = true;
    work_.notify_one();
    done_.wait(lock, [&] { return (queued_.empty() && started_.empty() && !busy_) || error_; });
    finishing_ = false;
    file_ = nullptr;
    throw_if_failed_locked();
}

void WriteBehind::abandon() noexcept {
    std::unique_lock lock(mutex_);
    queued_.clear();
    started_.clear();
    pending_ = 0;
    finishing_ = false;
    done_.wait(lock, [&] { return !busy_; });
    file_ = nullptr;
    error_ = nullptr;
    window_begin_ = UINT64_MAX;
    window_end_ = 0;
}

void WriteBehind::drop_later(const File& input, std::uint64_t offset,
                             std::uint64_t length) noexcept {
    {
        std::lock_guard lock(mutex_);
        if (thread_.joinable() && drops_.size() < kMaxQueuedDrops) {
            if (std::optional<File> copy = input.try_duplicate()) {
                drops_.push_back({std::move(*copy), offset, length});
                work_.notify_one();
                return;
            }
        }
    }
    input.drop_cache(offset, length);
}

void WriteBehind::hand_over_locked(Range range) {
    queued_.push_back(range);
    pending_ += range.length;
    work_.notify_one();
}

void WriteBehind::throw_if_failed_locked() {
    if (error_) {
        std::exception_ptr error = error_;
        error_ = nullptr;
        std::rethrow_exception(error);
    }
}

bool WriteBehind::must_retire_locked() const {
    // Windows can exceed kWindowBytes (a write straddling the limit lands in one window), so
    // the byte bound is checked too: the writer may be waiting on it.
    return !started_.empty() &&
           (started_.size() > kWindowsInFlight || pending_ >= kMaxPendingBytes || finishing_);
}

bool WriteBehind::has_step_locked() const {
    return !queued_.empty() || must_retire_locked() || !drops_.empty() ||
           (retired_since_sync_ >= kSyncBytes && !finishing_ && file_ != nullptr);
}

void WriteBehind::run() {
    // Termination signals belong to the threads that check for them between buffers.
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);

    std::unique_lock lock(mutex_);
    while (true) {
        work_.wait(lock, [&] { return stop_ || has_step_locked(); });
        if (stop_) {
            return;
        }
        // Start every queued window first (the device gets work early), then retire the
        // oldest beyond the in-flight limit, then drop inputs, then sync.
        Step step = Step::kSync;
        Range range;
        std::optional<Drop> drop;
        if (!queued_.empty()) {
            step = Step::kStart;
            range = queued_.front();
            queued_.pop_front();
            started_.push_back(range);
        } else if (must_retire_locked()) {
            step = Step::kRetire;
            range = started_.front();
        } else if (!drops_.empty()) {
            step = Step::kDrop;
            drop.emplace(std::move(drops_.front()));
            drops_.pop_front();
        }
        const File* file = file_;
        busy_ = true;
        lock.unlock();
        std::exception_ptr error;
        try {
            switch (step) {
                case Step::kStart:
                    file->start_writeback(range.offset, range.length);
                    break;
                case Step::kRetire:
                    file->wait_writeback(range.offset, range.length);
                    file->drop_cache(range.offset, range.length);
                    break;
                case Step::kDrop:
                    drop->input.drop_cache(drop->offset, drop->length);
                    drop.reset();  // closes the duplicate outside the lock
                    break;
                case Step::kSync:
                    file->sync_data();
                    break;
            }
        } catch (...) {
            error = std::current_exception();
        }
        lock.lock();
        busy_ = false;
        if (error) {
            // Nothing more for this file: no retry of a failed sync either.
            error_ = error;
            queued_.clear();
            started_.clear();
            pending_ = 0;
            retired_since_sync_ = 0;
        } else if (step == Step::kRetire && !started_.empty()) {
            // abandon() may have emptied the queues meanwhile.
            started_.pop_front();
            pending_ -= range.length;
            retired_since_sync_ += range.length;
        } else if (step == Step::kSync) {
            retired_since_sync_ = 0;
        }
        done_.notify_all();
    }
}

}  // namespace z2f::io
