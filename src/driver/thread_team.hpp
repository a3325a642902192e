// A few threads doing one job's shares, watched from the calling thread: what the in-memory
// reader (state_dict_reader.cpp) runs its reads on.
//
// `work(index, stop)` runs on thread `index` of `count`; it calls stop.check() between chunks of
// its work. The calling thread waits, and calls `keep_going` about every 50 ms (the Python
// binding checks for Ctrl-C there). The first share to fail stops the others at their next
// check, and its error is rethrown once every thread has ended; `keep_going` returning false
// stops them all and run_team throws Error(kInterrupted) (an exception from it is rethrown
// instead). No exception escapes a thread.
#pragma once

#include <atomic>
#include <functional>

namespace z2f::driver {

class StopFlag {
  public:
    // Throws when the team is stopping (the exception is the team's own, never rethrown).
    void check() const;
    void raise() noexcept { stop_.store(true, std::memory_order_relaxed); }
    bool raised() const noexcept { return stop_.load(std::memory_order_relaxed); }

  private:
    std::atomic<bool> stop_{false};
};

void run_team(unsigned count, const std::function<void(unsigned, const StopFlag&)>& work,
              const std::function<bool()>& keep_going);

}  // namespace z2f::driver
