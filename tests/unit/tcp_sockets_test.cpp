#include "io/tcp_sockets.hpp"

#include <algorithm>
#include <unistd.h>

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

namespace {

// A descriptor closed at the end of the scope.
class Descriptor {
  public:
    explicit Descriptor(int fd) : fd_(fd) {}
    ~Descriptor() {
        if (fd_ >= 0)
            ::close(fd_);
    }
    Descriptor(const Descriptor&) = delete;
    Descriptor& operator=(const Descriptor&) = delete;
    int get() const { return fd_; }

  private:
    int fd_;
};

// A listening TCP socket on 127.0.0.1 (any free port) and a client connected to it.
struct LoopbackConnection {
    Descriptor listener{::socket(AF_INET, SOCK_STREAM, 0)};
    Descriptor client{::socket(AF_INET, SOCK_STREAM, 0)};

    LoopbackConnection() {
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t length = sizeof address;
        EXPECT_EQ(::bind(listener.get(), reinterpret_cast<sockaddr*>(&address), length), 0);
        EXPECT_EQ(::listen(listener.get(), 1), 0);
        EXPECT_EQ(::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&address), &length), 0);
        EXPECT_EQ(::connect(client.get(), reinterpret_cast<sockaddr*>(&address), length), 0);
    }
};

bool contains(const std::vector<int>& descriptors, int fd) {
    return std::find(descriptors.begin(), descriptors.end(), fd) != descriptors.end();
}

TEST(TcpSockets, ListsTcpSocketsAndNothingElse) {
    LoopbackConnection connection;
    int pipe_ends[2] = {-1, -1};
    ASSERT_EQ(::pipe(pipe_ends), 0);
    Descriptor read_end(pipe_ends[0]);
    Descriptor write_end(pipe_ends[1]);
    int pair[2] = {-1, -1};
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
    Descriptor unix_a(pair[0]);
    Descriptor unix_b(pair[1]);
    Descriptor udp(::socket(AF_INET, SOCK_DGRAM, 0));

    const std::vector<int> sockets = z2f::io::tcp_socket_descriptors();
    EXPECT_TRUE(std::is_sorted(sockets.begin(), sockets.end()));
    EXPECT_TRUE(contains(sockets, connection.listener.get()));
    EXPECT_TRUE(contains(sockets, connection.client.get()));
    for (const int other :
         {read_end.get(), write_end.get(), unix_a.get(), unix_b.get(), udp.get(), 0, 1, 2}) {
        if (other != connection.listener.get() && other != connection.client.get()) {
            EXPECT_FALSE(contains(sockets, other)) << "descriptor " << other;
        }
    }
}

TEST(TcpSockets, DisablesNagleOnlyOnSocketsOpenedAfterTheSnapshot) {
    LoopbackConnection earlier;
    const std::vector<int> before = z2f::io::tcp_socket_descriptors();
    LoopbackConnection later;
    ASSERT_FALSE(z2f::io::tcp_nodelay(later.client.get()));  // Linux's default: Nagle on

    EXPECT_EQ(z2f::io::disable_nagle_on_new_tcp_sockets(before), 2U);  // listener and client
    EXPECT_TRUE(z2f::io::tcp_nodelay(later.client.get()));
    EXPECT_TRUE(z2f::io::tcp_nodelay(later.listener.get()));
    EXPECT_FALSE(z2f::io::tcp_nodelay(earlier.client.get()));
    EXPECT_FALSE(z2f::io::tcp_nodelay(earlier.listener.get()));
}

TEST(TcpSockets, NodelayOfSomethingThatIsNoTcpSocketIsFalse) {
    EXPECT_FALSE(z2f::io::tcp_nodelay(-1));
    int pipe_ends[2] = {-1, -1};
    ASSERT_EQ(::pipe(pipe_ends), 0);
    Descriptor read_end(pipe_ends[0]);
    Descriptor write_end(pipe_ends[1]);
    EXPECT_FALSE(z2f::io::tcp_nodelay(read_end.get()));
}

}  // namespace
