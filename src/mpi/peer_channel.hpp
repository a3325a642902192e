// Point-to-point notices exchanged while ranks work independently (execute phase):
//   - failure notices: a rank that fails tells every other rank at once, so that nobody spends
//     minutes copying for a run that is already lost (checked after every buffer of I/O);
//   - progress reports: ranks send their byte counts to rank 0, which prints the job's progress.
// Messages are small, sent with MPI_Isend, and received with MPI_Iprobe + MPI_Recv. `drain()`,
// a collective, receives whatever is still in flight so that MPI_Finalize finds no pending
// message.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "mpi/communicator.hpp"

namespace z2f::mpi {

class PeerChannel {
  public:
    explicit PeerChannel(const Communicator& comm);
    ~PeerChannel();
    PeerChannel(const PeerChannel&) = delete;
    PeerChannel& operator=(const PeerChannel&) = delete;

    // Tells every other rank that this rank failed (once; later calls do nothing).
    void announce_failure();
    // Whether another rank has announced a failure. Never blocks.
    bool peer_failed();

    // Non-root ranks: reports this rank's completed bytes to rank 0, at most once per second
    // unless `force`.
    void report_progress(std::uint64_t done, bool force = false);
    // Rank 0: completed bytes over all ranks, as last reported (its own included).
    std::uint64_t total_progress(std::uint64_t own_done);

    // Collective: completes every message still in flight.
    void drain();

  private:
    void poll();

    const Communicator& comm_;
    bool announced_ = false;
    std::vector<MPI_Request> requests_;  // failure notices
    MPI_Request progress_request_ = MPI_REQUEST_NULL;
    std::vector<bool> failure_received_;
    bool peer_failed_ = false;
    std::uint64_t progress_sent_ = 0;
    std::vector<std::uint64_t> progress_received_;
    std::vector<std::uint64_t> progress_of_rank_;
    std::uint64_t progress_value_ = 0;  // buffer of the last progress Isend
    std::chrono::steady_clock::time_point last_report_{};
    bool drained_ = false;
};

}  // namespace z2f::mpi
