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

// One request's bytes as the event loop read them, then the socket. Reading the socket must
// end by the request's deadline; writes wait at most the write timeout for the client to take more.
class ConnectionStream final : public httplib::Stream {
public:
    ConnectionStream(int fd, std::string bytes, time_t read_timeout_s, time_t write_timeout_s)
        : fd_(fd), bytes_(std::move(bytes)), deadline_(Clock::now() + std::chrono::seconds(read_timeout_s)),
          write_timeout_ms_(static_cast<int>(std::min<time_t>(write_timeout_s, 24 * 3600) * 1000)) {}

    // What was read and not consumed: the start of a next request (a client that pipelines).
    std::string unread() { return bytes_.substr(pos_); }

    bool is_readable() const override { return pos_ < bytes_.size() || wait_for(fd_, POLLIN, remaining_ms()); }
    bool is_writable() const override { return wait_for(fd_, POLLOUT, write_timeout_ms_) && !peer_closed(fd_); }

    ssize_t read(char* ptr, size_t size) override {
        if (pos_ == bytes_.size()) {
            bytes_.clear();
            pos_ = 0;
            char buf[16384];
            ssize_t n;
            do {
                if (Clock::now() >= deadline_ || !wait_for(fd_, POLLIN, remaining_ms())) {
                    t_timed_out = true;
                    return -1;
                }
                n = ::recv(fd_, buf, sizeof buf, 0);
            } while (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK));
            if (n <= 0) return n;
            bytes_.assign(buf, static_cast<size_t>(n));
        }
        const size_t k = std::min(size, bytes_.size() - pos_);
        std::memcpy(ptr, bytes_.data() + pos_, k);
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

    int fd_;
    std::string bytes_;
    size_t pos_ = 0;
    Clock::time_point deadline_;
    int write_timeout_ms_;
};

}  // namespace

// httplib ends a streamed answer once its own listening socket is gone, and it has none: the
// event loop listens. Mark it present (httplib never closes it: its listen() and stop() are
// not used).
ConnectionServer::ConnectionServer() { svr_sock_ = 0; }

void ConnectionServer::serve(ConnectionJob& job, bool last) {
    ConnectionStream stream(job.fd, std::move(job.bytes), read_timeout_sec_, write_timeout_sec_);
    t_connection_socket = job.fd;
    t_timed_out = false;
    t_close = false;
    bool closed = false;
    const bool ok = process_request(stream, last, closed, nullptr);
    t_connection_socket = -1;
    job.bytes = stream.unread();
    using After = ConnectionJob::After;
    job.after = t_close ? After::Drain : (!ok || closed || last) ? After::Close : After::KeepAlive;
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
