// The TCP sockets of this process, and Nagle's algorithm on them.
//
// Why. An MPI rank started by a launcher talks to the node's PMIx server (mpirun's or orted's,
// Slurm's slurmstepd under `srun --mpi=pmix`) over a TCP connection to the loopback address,
// which the PMIx client opens without TCP_NODELAY. At MPI_Finalize the client sends its
// fence request as several small writes; Nagle's algorithm holds the later ones until the
// first is acknowledged, and the server delays that acknowledgement (Linux: 40 ms). Every
// launched rank therefore spent ~44 ms in MPI_Finalize on the development machine, 2 ms with
// TCP_NODELAY set on the sockets MPI_Init opened (docs/performance.md). MPI's own TCP
// transport sets TCP_NODELAY on its connections anyway; setting it changes only when bytes
// leave, never which bytes or in what order.
//
// How. The process's descriptors are listed from /proc/self/fd (Linux, list_directory of
// posix_file.hpp); a descriptor is a TCP
// socket when it is a stream socket of the IPv4 or IPv6 family. The caller snapshots the
// sockets before MPI_Init and disables Nagle only on those that appeared during it, so a
// socket the process had before (a descriptor inherited from a parent) is left alone.
// Nothing here throws: a descriptor that closes meanwhile, or a /proc that cannot be read,
// is skipped.
#pragma once

#include <cstddef>
#include <vector>

namespace z2f::io {

// Descriptors of this process's TCP sockets (IPv4 or IPv6 stream sockets), ascending.
std::vector<int> tcp_socket_descriptors() noexcept;

// Whether TCP_NODELAY is set on this TCP socket (false when it cannot be asked).
bool tcp_nodelay(int descriptor) noexcept;

// Sets TCP_NODELAY on every TCP socket of the process that is not in `before` (a result of
// tcp_socket_descriptors()); returns how many it set.
std::size_t disable_nagle_on_new_tcp_sockets(const std::vector<int>& before) noexcept;

}  // namespace z2f::io
