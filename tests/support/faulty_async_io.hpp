// An AsyncIo that passes requests to a real engine, except those a rule picks (by the order in
// which they were submitted, from 0): they fail with an errno, complete with 0 bytes, are sent
// shortened (a genuine short transfer), or are made whole but reported as `short_length` bytes
// (a short transfer that ends where O_DIRECT cannot start the rest). How the tests make EIO,
// ENOSPC, EINVAL (a file system refusing O_DIRECT), short and stuck transfers happen on demand.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <utility>
#include <vector>

#include "io/async_io.hpp"

namespace z2f::testing {

class FaultyAsyncIo final : public io::AsyncIo {
  public:
    enum class Fault { kFail, kZero, kShort, kReportShort };
    struct Rule {
        std::size_t request = 0;
        Fault fault = Fault::kFail;
        int errnum = 0;                // kFail
        std::size_t short_length = 0;  // kShort
    };

    FaultyAsyncIo(std::unique_ptr<io::AsyncIo> inner, std::vector<Rule> rules)
        : inner_(std::move(inner)), rules_(std::move(rules)) {}

    // Requests [0, count) fail with `errnum`.
    static std::unique_ptr<FaultyAsyncIo> failing_first(io::IoEngine engine, std::size_t depth,
                                                        std::size_t count, int errnum) {
        std::vector<Rule> rules;
        for (std::size_t i = 0; i < count; ++i) {
            rules.push_back({i, Fault::kFail, errnum, 0});
        }
        return std::make_unique<FaultyAsyncIo>(io::make_async_io(engine, depth), std::move(rules));
    }

    void submit(const io::IoRequest& request) override {
        const std::size_t index = submitted_++;
        for (const Rule& rule : rules_) {
            if (rule.request != index) {
                continue;
            }
            switch (rule.fault) {
                case Fault::kFail:
                    synthetic_.push_back({request.tag, -static_cast<std::int64_t>(rule.errnum)});
                    return;
                case Fault::kZero:
                    synthetic_.push_back({request.tag, 0});
                    return;
                case Fault::kShort: {
                    io::IoRequest shorter = request;
                    shorter.length = std::min(request.length, rule.short_length);
                    inner_->submit(shorter);
                    return;
                }
                case Fault::kReportShort:
                    reported_short_.push_back({request.tag, rule.short_length});
                    inner_->submit(request);
                    return;
            }
        }
        inner_->submit(request);
    }

    io::IoCompletion wait_one() override {
        if (!synthetic_.empty()) {
            io::IoCompletion completion = synthetic_.front();
            synthetic_.pop_front();
            return completion;
        }
        io::IoCompletion completion = inner_->wait_one();
        for (auto at = reported_short_.begin(); at != reported_short_.end(); ++at) {
            if (at->first == completion.tag && completion.result > 0) {
                completion.result = std::min<std::int64_t>(completion.result,
                                                           static_cast<std::int64_t>(at->second));
                reported_short_.erase(at);
                break;
            }
        }
        return completion;
    }

    std::size_t in_flight() const noexcept override {
        return inner_->in_flight() + synthetic_.size();
    }
    std::size_t depth() const noexcept override { return inner_->depth(); }
    io::IoEngine engine() const noexcept override { return inner_->engine(); }
    std::size_t submitted() const noexcept { return submitted_; }

  private:
    std::unique_ptr<io::AsyncIo> inner_;
    std::vector<Rule> rules_;
    std::deque<io::IoCompletion> synthetic_;
    std::vector<std::pair<std::uint64_t, std::size_t>> reported_short_;  // tag, bytes reported
    std::size_t submitted_ = 0;
};

}  // namespace z2f::testing
