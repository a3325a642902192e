#include "driver/phase_runner.hpp"

#include <algorithm>
#include <csignal>

#include "io/signals.hpp"
#include "mpi/mpi_start.hpp"

namespace z2f::driver {

using Clock = std::chrono::steady_clock;

PhaseRunner::PhaseRunner(MPI_Comm comm, Observer* observer)
    : comm_(comm), observer_(observer), start_(Clock::now()), phase_start_(start_) {}

bool PhaseRunner::settle(const char* phase, const mpi::Outcome& outcome) {
    mpi::Agreement agreement = mpi::agree(comm_, outcome);
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
    const int signal = io::termination_signal();
    if (signal == 0)
        return;
    // Where it came from, in the words of whoever reads the message.
    std::string source;
    if (io::termination_from_parent() && mpi::started_by_launcher()) {
        source =
            " from the launcher (which passes on a cancellation, or a SIGINT or SIGTERM it "
            "got itself, as SIGTERM)";
    } else if (io::termination_from_terminal()) {
        source = signal == SIGINT ? " from the terminal (Ctrl-C)" : " from the kernel";
    } else if (io::termination_from_parent()) {
        source = " from the parent process (pid " + std::to_string(io::termination_sender()) + ")";
    } else if (io::termination_sender() != 0) {
        source = " from process " + std::to_string(io::termination_sender());
    }
    throw Error(ErrorKind::kInterrupted,
                std::string("interrupted by ") + io::signal_name(signal) + source);
}

}  // namespace z2f::driver
