#include "driver/thread_team.hpp"

#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "zero2fp32/error.hpp"

namespace z2f::driver {
namespace {

// What StopFlag::check throws: a share that stopped because the team is stopping has no error
// of its own to report.
struct Stopped {};

constexpr auto kPoll = std::chrono::milliseconds(50);

}  // namespace

void StopFlag::check() const {
    if (raised())
        throw Stopped{};
}

void run_team(unsigned count, const std::function<void(unsigned, const StopFlag&)>& work,
              const std::function<bool()>& keep_going) {
    StopFlag stop;
    std::mutex mutex;
    std::condition_variable ended;
    unsigned running = count;
    std::exception_ptr first_error;
    auto share = [&](unsigned index) {
        std::exception_ptr error;
        try {
            work(index, stop);
        } catch (const Stopped&) {
        } catch (...) {
            error = std::current_exception();
            stop.raise();
        }
        std::lock_guard lock(mutex);
        if (error && !first_error)
            first_error = error;
        --running;
        ended.notify_all();
    };
    std::vector<std::jthread> threads;
    threads.reserve(count);
    bool given_up = false;
    try {
        for (unsigned i = 0; i < count; ++i)
            threads.emplace_back(share, i);
    } catch (...) {
        // No thread to start (EAGAIN): the ones started stop, and the error is reported.
        stop.raise();
        std::unique_lock lock(mutex);
        running -= count - static_cast<unsigned>(threads.size());
        ended.wait(lock, [&] { return running == 0; });
        throw;
    }
    std::unique_lock lock(mutex);
    while (running > 0) {
        if (ended.wait_for(lock, kPoll, [&] { return running == 0; }))
            break;
        if (!given_up && keep_going) {
            lock.unlock();
            bool go_on = false;
            try {
                go_on = keep_going();
            } catch (...) {
                // Reported like a share's error, once the threads have stopped.
                std::lock_guard failed(mutex);
                if (!first_error)
                    first_error = std::current_exception();
            }
            lock.lock();
            if (!go_on) {
                given_up = true;
                stop.raise();
            }
        }
    }
    lock.unlock();
    threads.clear();  // joined
    if (first_error)
        std::rethrow_exception(first_error);
    if (given_up)
        throw Error(ErrorKind::kInterrupted, "the read was interrupted");
}

}  // namespace z2f::driver
