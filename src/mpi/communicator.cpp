#include "mpi/communicator.hpp"

#include <algorithm>
#include <chrono>
#include <limits>
#include <thread>

#include "common/errors.hpp"

namespace z2f::mpi {

Communicator::Communicator(MPI_Comm comm) {
    // MPI_Initialized is one of the few MPI functions allowed before MPI_Init.
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized == 0)
        return;
    comm_ = comm;
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
}

void Communicator::barrier() const {
    if (alone())
        return;
    MPI_Barrier(comm_);
}

void Communicator::quiet_barrier(const std::function<void()>& while_waiting) const {
    if (alone())
        return;
    MPI_Request request;
    MPI_Ibarrier(comm_, &request);
    auto pause = std::chrono::microseconds(50);
    while (true) {
        int done = 0;
        MPI_Test(&request, &done, MPI_STATUS_IGNORE);
        if (done != 0) {
            return;
        }
        if (while_waiting) {
            while_waiting();
        }
        std::this_thread::sleep_for(pause);
        pause = std::min(pause * 2, std::chrono::microseconds(5000));
    }
}

std::vector<std::byte> Communicator::broadcast(std::vector<std::byte> bytes, int root) const {
    if (alone())
        return bytes;
    std::uint64_t size = bytes.size();
    MPI_Bcast(&size, 1, MPI_UINT64_T, root, comm_);
    bytes.resize(static_cast<std::size_t>(size));
    // Metadata stays far below 2 GiB, MPI's count limit; chunk anyway to be safe.
    constexpr std::size_t kChunk = std::size_t{1} << 30;
    for (std::size_t done = 0; done < bytes.size(); done += kChunk) {
        auto count = static_cast<int>(std::min(kChunk, bytes.size() - done));
        MPI_Bcast(bytes.data() + done, count, MPI_BYTE, root, comm_);
    }
    return bytes;
}

std::vector<std::vector<std::byte>> Communicator::all_gather(
    std::span<const std::byte> mine) const {
    if (alone())
        return {std::vector<std::byte>(mine.begin(), mine.end())};
    std::uint64_t my_size = mine.size();
    std::vector<std::uint64_t> sizes(static_cast<std::size_t>(size_));
    MPI_Allgather(&my_size, 1, MPI_UINT64_T, sizes.data(), 1, MPI_UINT64_T, comm_);
    std::vector<int> counts(static_cast<std::size_t>(size_));
    std::vector<int> displacements(static_cast<std::size_t>(size_));
    std::uint64_t total = 0;
    for (std::size_t r = 0; r < sizes.size(); ++r) {
        if (total + sizes[r] > static_cast<std::uint64_t>(std::numeric_limits<int>::max())) {
            throw_internal_error("metadata exchange larger than 2 GiB");
        }
        counts[r] = static_cast<int>(sizes[r]);
        displacements[r] = static_cast<int>(total);
        total += sizes[r];
    }
    std::vector<std::byte> all(static_cast<std::size_t>(total));
    MPI_Allgatherv(mine.data(), static_cast<int>(mine.size()), MPI_BYTE, all.data(), counts.data(),
                   displacements.data(), MPI_BYTE, comm_);
    std::vector<std::vector<std::byte>> out(sizes.size());
    for (std::size_t r = 0; r < sizes.size(); ++r) {
        auto begin = all.begin() + displacements[r];
        out[r].assign(begin, begin + counts[r]);
    }
    return out;
}

std::uint64_t Communicator::sum(std::uint64_t value) const {
    if (alone())
        return value;
    std::uint64_t out = 0;
    MPI_Allreduce(&value, &out, 1, MPI_UINT64_T, MPI_SUM, comm_);
    return out;
}

std::uint64_t Communicator::max(std::uint64_t value) const {
    if (alone())
        return value;
    std::uint64_t out = 0;
    MPI_Allreduce(&value, &out, 1, MPI_UINT64_T, MPI_MAX, comm_);
    return out;
}

}  // namespace z2f::mpi
