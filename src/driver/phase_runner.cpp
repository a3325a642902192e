#include "driver/phase_runner.hpp"

#include <algorithm>

#include "io/signals.hpp"

namespace z2f::driver {

using Clock = std::chrono::steady_clock;

PhaseRunner::PhaseRunner(MPI_Comm comm, Observer* observer)
    : comm_(comm), observer_(observer), start_(Clock::now()), phase_start_(start_) {}

bool PhaseRunner::settle(const char* phase, const parallel::Outcome& outcome) {
    parallel::Agreement agreement = parallel::agree(comm_, outcome);
    Clock::time_point now = Clock::now();
    double seconds = std::chrono::duration<double>(now - phase_start_).count();
    phase_start_ = now;
    auto same = [&](const auto& entry) { return entry.first == phase; };
    auto it = std::find_if(phase_seconds_.begin(), phase_seconds_.end(), same);
    if (it == phase_seconds_.end()) {
        phase_seconds_.emplace_back(phase, seconds);
    } else {
        it->second += seconds;
    }
    if (agreement.ok)
        return true;
    if (!failure_)
        failure_ = std::move(agreement);
    return false;
}

void PhaseRunner::say(MessageLevel level, const std::string& text) const {
    if (Observer* sink = observer())
        sink->message(level, text);
}

double PhaseRunner::elapsed_seconds() const {
    return std::chrono::duration<double>(Clock::now() - start_).count();
}

void throw_if_interrupted() {
    if (int signal = io::termination_signal()) {
        throw Error(ErrorKind::kInterrupted,
                    std::string("interrupted by ") + io::signal_name(signal) +
                        (io::termination_from_parent()
                             ? " from the launcher (which passes on a cancellation, or a SIGINT "
                               "or SIGTERM it got itself, as SIGTERM)"
                             : ""));
    }
}

}  // namespace z2f::driver
