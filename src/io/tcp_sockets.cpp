#include "io/tcp_sockets.hpp"

#include <algorithm>
#include <charconv>
#include <string>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "io/posix_file.hpp"

namespace z2f::io {
namespace {

bool is_tcp_socket(int descriptor) noexcept {
    int type = 0;
    socklen_t length = sizeof type;
    if (::getsockopt(descriptor, SOL_SOCKET, SO_TYPE, &type, &length) != 0 || type != SOCK_STREAM)
        return false;  // not a socket (ENOTSOCK), or not a stream socket
    sockaddr_storage address{};
    length = sizeof address;
    if (::getsockname(descriptor, reinterpret_cast<sockaddr*>(&address), &length) != 0)
        return false;
    return address.ss_family == AF_INET || address.ss_family == AF_INET6;
}

}  // namespace

std::vector<int> tcp_socket_descriptors() noexcept {
    std::vector<int> sockets;
    try {
        // The listing's own descriptor is closed again when list_directory returns.
        for (const std::string& name : list_directory("/proc/self/fd")) {
            int descriptor = -1;
            const char* end = name.data() + name.size();
            if (std::from_chars(name.data(), end, descriptor).ptr == end &&
                is_tcp_socket(descriptor))
                sockets.push_back(descriptor);
        }
    } catch (...) {
        return {};  // no /proc, or out of memory: change nothing, which is harmless
    }
    std::sort(sockets.begin(), sockets.end());
    return sockets;
}

bool tcp_nodelay(int descriptor) noexcept {
    int value = 0;
    socklen_t length = sizeof value;
    return ::getsockopt(descriptor, IPPROTO_TCP, TCP_NODELAY, &value, &length) == 0 && value != 0;
}

std::size_t disable_nagle_on_new_tcp_sockets(const std::vector<int>& before) noexcept {
    std::size_t set = 0;
    for (const int descriptor : tcp_socket_descriptors()) {
        if (std::binary_search(before.begin(), before.end(), descriptor))
            continue;
        const int one = 1;
        if (::setsockopt(descriptor, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0)
            ++set;
    }
    return set;
}

}  // namespace z2f::io
