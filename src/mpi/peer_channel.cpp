#include "mpi/peer_channel.hpp"

#include <algorithm>

namespace z2f::mpi {
namespace {

constexpr int kFailureTag = 7101;
constexpr int kProgressTag = 7102;

}  // namespace

PeerChannel::PeerChannel(const Communicator& comm)
    : comm_(comm),
      failure_received_(static_cast<std::size_t>(comm.size()), false),
      progress_received_(static_cast<std::size_t>(comm.size()), 0),
      progress_of_rank_(static_cast<std::size_t>(comm.size()), 0) {}

PeerChannel::~PeerChannel() {
    // drain() is the normal way out; if it was skipped, at least do not leave requests behind.
    if (!drained_ && !requests_.empty()) {
        MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
    }
    if (!drained_ && progress_request_ != MPI_REQUEST_NULL) {
        MPI_Wait(&progress_request_, MPI_STATUS_IGNORE);
    }
}

void PeerChannel::announce_failure() {
    if (announced_) {
        return;
    }
    announced_ = true;
    static const char kNotice = 1;
    for (int peer = 0; peer < comm_.size(); ++peer) {
        if (peer == comm_.rank())
            continue;
        MPI_Request request;
        MPI_Isend(&kNotice, 1, MPI_CHAR, peer, kFailureTag, comm_.raw(), &request);
        requests_.push_back(request);
    }
}

void PeerChannel::poll() {
    if (comm_.alone())
        return;  // no peer to hear from (and, without MPI_Init, no MPI to ask)
    while (true) {
        int flag = 0;
        MPI_Status status;
        MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm_.raw(), &flag, &status);
        if (flag == 0) {
            return;
        }
        auto source = static_cast<std::size_t>(status.MPI_SOURCE);
        if (status.MPI_TAG == kFailureTag) {
            char notice = 0;
            MPI_Recv(&notice, 1, MPI_CHAR, status.MPI_SOURCE, kFailureTag, comm_.raw(),
                     MPI_STATUS_IGNORE);
            failure_received_[source] = true;
            peer_failed_ = true;
        } else if (status.MPI_TAG == kProgressTag) {
            std::uint64_t value = 0;
            MPI_Recv(&value, 1, MPI_UINT64_T, status.MPI_SOURCE, kProgressTag, comm_.raw(),
                     MPI_STATUS_IGNORE);
            ++progress_received_[source];
            progress_of_rank_[source] = std::max(progress_of_rank_[source], value);
        } else {
            return;  // not ours; leave it to whoever expects it
        }
    }
}

bool PeerChannel::peer_failed() {
    poll();
    return peer_failed_;
}

void PeerChannel::report_progress(std::uint64_t done, bool force) {
    if (comm_.is_root()) {
        return;
    }
    auto now = std::chrono::steady_clock::now();
    if (!force && now - last_report_ < std::chrono::seconds(1)) {
        return;
    }
    // One report in flight at a time: its buffer must outlive the send.
    if (progress_request_ != MPI_REQUEST_NULL) {
        int complete = 0;
        MPI_Test(&progress_request_, &complete, MPI_STATUS_IGNORE);
        if (complete == 0) {
            if (!force) {
                return;
            }
            MPI_Wait(&progress_request_, MPI_STATUS_IGNORE);
        }
    }
    last_report_ = now;
    progress_value_ = done;
    MPI_Isend(&progress_value_, 1, MPI_UINT64_T, 0, kProgressTag, comm_.raw(), &progress_request_);
    ++progress_sent_;
}

std::uint64_t PeerChannel::total_progress(std::uint64_t own_done) {
    poll();
    progress_of_rank_[0] = own_done;
    std::uint64_t total = 0;
    for (std::uint64_t value : progress_of_rank_)
        total += value;
    return total;
}

void PeerChannel::drain() {
    // Who announced failures, and how many progress reports each rank sent.
    std::vector<std::byte> mine(9);
    mine[0] = static_cast<std::byte>(announced_ ? 1 : 0);
    for (int i = 0; i < 8; ++i) {
        mine[1 + static_cast<std::size_t>(i)] =
            static_cast<std::byte>((progress_sent_ >> (8 * i)) & 0xFF);
    }
    std::vector<std::vector<std::byte>> all = comm_.all_gather(mine);
    for (std::size_t peer = 0; peer < all.size(); ++peer) {
        if (static_cast<int>(peer) == comm_.rank())
            continue;
        if (all[peer][0] != std::byte{0} && !failure_received_[peer]) {
            char notice = 0;
            MPI_Recv(&notice, 1, MPI_CHAR, static_cast<int>(peer), kFailureTag, comm_.raw(),
                     MPI_STATUS_IGNORE);
            failure_received_[peer] = true;
        }
        if (comm_.is_root()) {
            std::uint64_t sent = 0;
            for (int i = 0; i < 8; ++i) {
                sent |= std::uint64_t{std::to_integer<std::uint8_t>(
                            all[peer][1 + static_cast<std::size_t>(i)])}
                        << (8 * i);
            }
            while (progress_received_[peer] < sent) {
                std::uint64_t value = 0;
                MPI_Recv(&value, 1, MPI_UINT64_T, static_cast<int>(peer), kProgressTag, comm_.raw(),
                         MPI_STATUS_IGNORE);
                ++progress_received_[peer];
                progress_of_rank_[peer] = std::max(progress_of_rank_[peer], value);
            }
        }
    }
    if (!requests_.empty()) {
        MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
        requests_.clear();
    }
    if (progress_request_ != MPI_REQUEST_NULL) {
        MPI_Wait(&progress_request_, MPI_STATUS_IGNORE);
    }
    drained_ = true;
}

}  // namespace z2f::mpi
