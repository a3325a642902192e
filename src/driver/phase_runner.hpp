// Running the phases of a conversion on every rank so that they all take the same road.
//
// `run(phase, work)` executes `work` inside mpi::capture (no exception escapes it), then
// agrees on the outcome with every rank (an all-gather). The first failed agreement is kept:
// every rank then stops and throws the same ConversionError. Timings per phase and the
// rank-0-only messages to the observer live here too.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mpi/agreement.hpp"
#include "mpi/communicator.hpp"
#include "zero2fp32/mpi.hpp"

namespace z2f::driver {

class PhaseRunner {
  public:
    PhaseRunner(MPI_Comm comm, Observer* observer);

    const mpi::Communicator& comm() const noexcept { return comm_; }
    std::uint32_t rank() const noexcept { return static_cast<std::uint32_t>(comm_.rank()); }
    bool is_root() const noexcept { return comm_.is_root(); }
    Observer* observer() const noexcept { return is_root() ? observer_ : nullptr; }

    // Runs `work` on every rank and agrees on how it went; false when any rank failed.
    template <typename Work>
    bool run(const char* phase, Work&& work) {
        return settle(phase, mpi::capture(std::forward<Work>(work)));
    }
    // Agrees on an outcome captured by the caller (phases with their own cleanup).
    bool settle(const char* phase, const mpi::Outcome& outcome);

    const std::optional<mpi::Agreement>& failure() const noexcept { return failure_; }

    // To the observer, on rank 0 only.
    void say(MessageLevel level, const std::string& text) const;

    std::vector<std::pair<std::string, double>> phase_seconds() const { return phase_seconds_; }
    double elapsed_seconds() const;

  private:
    mpi::Communicator comm_;
    Observer* observer_;
    std::chrono::steady_clock::time_point start_;
    std::chrono::steady_clock::time_point phase_start_;
    std::vector<std::pair<std::string, double>> phase_seconds_;
    std::optional<mpi::Agreement> failure_;
};

// Throws Error(kInterrupted) naming the signal when SIGTERM or SIGINT arrived.
void throw_if_interrupted();

}  // namespace z2f::driver
