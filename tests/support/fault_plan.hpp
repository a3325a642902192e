// A call hook (io/call_hook.hpp) for fault sweeps: it counts the I/O module's calls on paths
// under the folders it watches, and makes one chosen call (the Nth of a kind, from 0) fail with
// an errno or come back short. Calls on other paths (MPI's session files, the test's own
// reads) pass untouched and uncounted. Safe from any thread.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "io/call_hook.hpp"

namespace z2f::testing {

struct FaultTrigger {
    io::IoCall call = io::IoCall::kWrite;
    std::uint64_t nth = 0;
    int error = 0;         // 0 with shorten: a short transfer
    bool shorten = false;  // reads and writes only
};

class FaultPlan final : public io::CallHook {
  public:
    explicit FaultPlan(std::vector<std::string> watched, std::optional<FaultTrigger> trigger = {})
        : watched_(std::move(watched)), trigger_(trigger) {}

    io::CallFault before(io::IoCall call, std::string_view path) noexcept override {
        if (!watches(path))
            return {};
        const std::uint64_t n = counts_[static_cast<std::size_t>(call)].fetch_add(1);
        if (!trigger_ || trigger_->call != call || trigger_->nth != n)
            return {};
        fired_.store(true);
        return io::CallFault{trigger_->error, trigger_->shorten};
    }

    std::uint64_t count(io::IoCall call) const noexcept {
        return counts_[static_cast<std::size_t>(call)].load();
    }
    bool fired() const noexcept { return fired_.load(); }

  private:
    bool watches(std::string_view path) const noexcept {
        for (const std::string& folder : watched_) {
            if (path.size() >= folder.size() && path.substr(0, folder.size()) == folder &&
                (path.size() == folder.size() || path[folder.size()] == '/'))
                return true;
        }
        return false;
    }

    std::vector<std::string> watched_;
    std::optional<FaultTrigger> trigger_;
    std::array<std::atomic<std::uint64_t>, io::kIoCallCount> counts_{};
    std::atomic<bool> fired_{false};
};

// Installs a hook for the scope's lifetime.
class ScopedCallHook {
  public:
    explicit ScopedCallHook(io::CallHook& hook) { io::install_call_hook(&hook); }
    ~ScopedCallHook() { io::install_call_hook(nullptr); }
    ScopedCallHook(const ScopedCallHook&) = delete;
    ScopedCallHook& operator=(const ScopedCallHook&) = delete;
};

}  // namespace z2f::testing
