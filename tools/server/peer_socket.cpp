#include "tools/server/peer_socket.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

namespace strata::server {

namespace {

using Clock = std::chrono::steady_clock;

thread_local int t_connection_socket = -1;
thread_local bool t_timed_out = false;
thread_local bool t_close = false;

// Waits up to `timeout_ms` for `events` (or the peer hanging up, which a read reports).
bool wait_for(int fd, short events, int timeout_ms) {
    pollfd p{fd, events, 0};
    int r;
    do {
        r = ::poll(&p, 1, timeout_ms);
    } while (r < 0 && errno == EINTR);
    return r > 0;
}

void address_of(int fd, bool peer, std::string& ip, int& port) {
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    const int r = peer ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len)
                       : ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    char text[INET6_ADDRSTRLEN] = {};
    port = 0;
    if (r == 0 && a.ss_family == AF_INET) {
        const auto& in = reinterpret_cast<const sockaddr_in&>(a);
        ::inet_ntop(AF_INET, &in.sin_addr, text, sizeof text);
        port = ntohs(in.sin_port);
    } else if (r == 0 && a.ss_family == AF_INET6) {
        const auto& in6 = reinterpret_cast<const sockaddr_in6&>(a);
        ::inet_ntop(AF_INET6, &in6.sin6_addr, text, sizeof text);
        port = ntohs(in6.sin6_port);
    }
    ip = text;
}

// One connection's socket, buffered (httplib reads request lines a byte at a time), for all
// the requests a keep-alive client sends on it. Each request must have been read whole by
// its deadline; writes wait at most the write timeout for the client to take more.
class ConnectionStream final : public httplib::Stream {
public:
    ConnectionStream(int fd, time_t read_timeout_s, time_t write_timeout_s)
        : fd_(fd), read_timeout_(std::chrono::seconds(read_timeout_s)),
          write_timeout_ms_(static_cast<int>(std::min<time_t>(write_timeout_s, 24 * 3600) * 1000)) {}

    void begin_request() {
        deadline_ = Clock::now() + read_timeout_;
        t_timed_out = false;
    }
    // Bytes of a next request already read (a client that pipelines).
    bool has_buffered() const { return pos_ < end_; }

    bool is_readable() const override { return has_buffered() || wait_for(fd_, POLLIN, remaining_ms()); }
    bool is_writable() const override { return wait_for(fd_, POLLOUT, write_timeout_ms_) && !peer_closed(fd_); }

    ssize_t read(char* ptr, size_t size) override {
        if (!has_buffered()) {
            if (Clock::now() >= deadline_ || !wait_for(fd_, POLLIN, remaining_ms())) {
                t_timed_out = true;
                return -1;
            }
            if (size >= sizeof buf_) return receive(ptr, size);  // large body reads skip the copy
            const ssize_t n = receive(buf_, sizeof buf_);
            if (n <= 0) return n;
            pos_ = 0;
            end_ = static_cast<size_t>(n);
        }
        const size_t k = std::min(size, end_ - pos_);
        std::memcpy(ptr, buf_ + pos_, k);
        pos_ += k;
        return static_cast<ssize_t>(k);
    }

    ssize_t write(const char* ptr, size_t size) override {
        if (!wait_for(fd_, POLLOUT, write_timeout_ms_)) return -1;
        ssize_t n;
        do {
            // Never blocks past the poll: a partial write returns, and httplib writes the rest.
            n = ::send(fd_, ptr, size, MSG_NOSIGNAL | MSG_DONTWAIT);
        } while (n < 0 && errno == EINTR);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
        return n;
    }

    void get_remote_ip_and_port(std::string& ip, int& port) const override { address_of(fd_, true, ip, port); }
    void get_local_ip_and_port(std::string& ip, int& port) const override { address_of(fd_, false, ip, port); }
    socket_t socket() const override { return fd_; }

private:
    int remaining_ms() const {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now()).count();
        return static_cast<int>(std::clamp<int64_t>(left, 0, 24 * 3600 * 1000));
    }
    ssize_t receive(char* dst, size_t size) {
        ssize_t n;
        do {
            n = ::recv(fd_, dst, size, 0);
        } while (n < 0 && errno == EINTR);
        return n;
    }

    int fd_;
    std::chrono::seconds read_timeout_;
    int write_timeout_ms_;
    Clock::time_point deadline_ = Clock::now();
    char buf_[4096];
    size_t pos_ = 0, end_ = 0;
};

// After an answer sent with the request's body unread: closing at once would reset the
// connection (unread data) and could destroy the answer before the client reads it. Stop
// writing, then read and drop what the client still sends, for a moment.
void drain_before_close(int fd) {
    ::shutdown(fd, SHUT_WR);
    constexpr auto kLinger = std::chrono::seconds(1);
    constexpr size_t kMaxBytes = size_t{64} << 20;
    const auto until = Clock::now() + kLinger;
    char sink[65536];
    for (size_t drained = 0; drained < kMaxBytes && Clock::now() < until;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
        if (!wait_for(fd, POLLIN, static_cast<int>(std::max<int64_t>(left, 1)))) break;
        const ssize_t n = ::recv(fd, sink, sizeof sink, 0);
        if (n <= 0) break;
        drained += static_cast<size_t>(n);
    }
}

}  // namespace

bool ConnectionServer::process_and_close_socket(socket_t sock) {
    ConnectionStream stream(sock, read_timeout_sec_, write_timeout_sec_);
    t_connection_socket = sock;
    // Between requests the connection may idle for the keep-alive timeout; the server
    // stopping ends the wait within a poll step.
    const auto next_request = [&] {
        constexpr int kStepMs = 100;
        for (time_t waited = 0; waited < keep_alive_timeout_sec_ * 1000; waited += kStepMs) {
            if (svr_sock_ == INVALID_SOCKET) return false;
            if (wait_for(sock, POLLIN, kStepMs)) return true;
        }
        return false;
    };
    bool ok = false;
    for (size_t left = keep_alive_max_count_; left > 0 && svr_sock_ != INVALID_SOCKET; --left) {
        if (!stream.has_buffered() && !next_request()) break;
        stream.begin_request();
        t_close = false;
        bool closed = false;
        ok = process_request(stream, left == 1, closed, nullptr);
        if (!ok || closed || t_close) break;
    }
    if (t_close) drain_before_close(sock);
    t_connection_socket = -1;
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
    return ok;
}

void ConnectionServer::set_accept_backlog(int n) {
    if (svr_sock_ != INVALID_SOCKET) ::listen(svr_sock_, n);  // on a listening socket, only the backlog changes
}

int current_connection_socket() { return t_connection_socket; }

void close_after_response() { t_close = true; }

bool request_timed_out() { return t_timed_out; }

bool peer_closed(int fd) {
    if (fd < 0) return false;
    pollfd p{fd, POLLRDHUP, 0};
    if (poll(&p, 1, 0) <= 0) return false;
    return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

}  // namespace strata::server
