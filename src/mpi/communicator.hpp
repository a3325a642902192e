// A thin wrapper over an MPI communicator: the handful of collectives the phases use, on byte
// buffers. Only metadata ever travels through it (file lists, interpreted pickles, statuses,
// CRCs, counters); tensor bytes never do.
//
// A process that did not initialize MPI (the converter started without a launcher: it is the one
// rank of its job, mpi/mpi_start.hpp) is a communicator of this process alone, and so is
// any communicator of one rank: its collectives return at once and call no MPI function.
//
// Collectives here never throw on their own (MPI errors abort the job, MPI's default), and
// callers never enter them with an exception in flight: errors are caught, agreed upon with
// `agree()` (agreement.hpp), and only then turned back into exceptions or exit codes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include <mpi.h>

namespace z2f::mpi {

class Communicator {
  public:
    // `comm` is not used when MPI is not initialized: this process alone.
    explicit Communicator(MPI_Comm comm);

    int rank() const noexcept { return rank_; }
    int size() const noexcept { return size_; }
    MPI_Comm raw() const noexcept { return comm_; }
    bool is_root() const noexcept { return rank_ == 0; }
    // No other rank: nothing to exchange and nobody to wait for.
    bool alone() const noexcept { return size_ == 1; }

    void barrier() const;
    // A barrier that sleeps between polls instead of spinning, so that ranks done early do not
    // steal CPU from ranks still working on an oversubscribed node; `while_waiting` runs on
    // every poll (rank 0 keeps the progress display alive with it).
    void quiet_barrier(const std::function<void()>& while_waiting = {}) const;
    // Root's bytes on every rank.
    std::vector<std::byte> broadcast(std::vector<std::byte> bytes, int root = 0) const;
    // Every rank's bytes on every rank, indexed by rank.
    std::vector<std::vector<std::byte>> all_gather(std::span<const std::byte> mine) const;
    std::uint64_t sum(std::uint64_t value) const;
    std::uint64_t max(std::uint64_t value) const;

  private:
    MPI_Comm comm_ = MPI_COMM_NULL;
    int rank_ = 0;
    int size_ = 1;
};

}  // namespace z2f::mpi
