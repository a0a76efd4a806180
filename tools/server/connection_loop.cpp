#include "tools/server/connection_loop.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tools/openai/api_error.h"
#include "tools/openai/json_fields.h"
#include "tools/server/request_framing.h"
#include "tools/server/worker_lanes.h"

namespace strata::server {

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kBacklog = 1024;
constexpr auto kTick = std::chrono::milliseconds(100);
// After an answer with the request unread: closing at once would reset the connection and
// could destroy the answer before the client reads it, so stop writing and drop what the
// client still sends for a moment.
constexpr auto kLinger = std::chrono::milliseconds(1000);
// Refused connections kept open to linger; past this many, a refused one is closed at once.
constexpr size_t kMaxLingering = 512;
// Probes waiting for a reserved worker: they take microseconds each, so a deep queue drains fast.
constexpr size_t kMaxWaitingProbes = 1024;

bool is_probe(const RequestFrame& f) {
    return (f.method == "GET" || f.method == "HEAD") && (f.path == "/health" || f.path == "/metrics" || f.path == "/v1/models");
}

const char* reason_phrase(int status) {
    switch (status) {
        case 400: return "Bad Request";
        case 408: return "Request Timeout";
        case 413: return "Payload Too Large";
        case 429: return "Too Many Requests";
        case 431: return "Request Header Fields Too Large";
        case 503: return "Service Unavailable";
        default: return "Error";
    }
}

std::string error_response(const openai::ApiError& e) {
    const std::string body = openai::dump(e.to_json());
    std::string out = fmt::format("HTTP/1.1 {} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
                                  e.status(), reason_phrase(e.status()), body.size());
    if (e.status() == 429 || e.status() == 503) out += "Retry-After: 1\r\n";
    return out + "\r\n" + body;
}

openai::ApiError refusal(int status, std::string message, std::string code) {
    const char* type = status == 429 ? "rate_limit_error" : status == 503 ? "server_error" : "invalid_request_error";
    return openai::ApiError(status, std::move(message), type, {}, std::move(code));
}

std::string address_text(const sockaddr_storage& a) {
    char text[INET6_ADDRSTRLEN] = {};
    if (a.ss_family == AF_INET)
        ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(a).sin_addr, text, sizeof text);
    else if (a.ss_family == AF_INET6)
        ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(a).sin6_addr, text, sizeof text);
    return text;
}

void send_now(int fd, const std::string& data) {
    // A refusal is small: it fits the socket's buffer, or the client is not worth waiting for.
    while (::send(fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && errno == EINTR) {
    }
}

}  // namespace

struct ConnectionLoop::Impl {
    struct Conn {
        std::string client;  // empty: refused at accept, not counted against the limits
        std::string bytes;   // read and not yet handed over
        enum class Phase { Reading, Working, Lingering } phase = Phase::Reading;
        Clock::time_point deadline, started_at;
        bool started = false;     // bytes of the current request have arrived
        bool continued = false;   // "100 Continue" sent for it
        bool watched = false;     // in the epoll set
        bool holds_request = false;  // counted in client_requests (a general worker has it)
    };
    LoopLimits limits;
    Metrics& metrics;
    Serve serve;
    int listener = -1, epfd = -1, wake = -1, bound_port = -1;
    std::atomic<bool> stopping{false};
    bool shut = false, accepting = true;
    Clock::time_point resume_accept{};
    std::unordered_map<int, Conn> conns;
    std::unordered_map<std::string, size_t> client_conns, client_requests;
    size_t counted = 0, lingering_refused = 0;
    std::mutex returned_mu;
    std::vector<ConnectionJob> returned;
    // Last: their threads use the members above, and stop before those are destroyed.
    WorkerLane<ConnectionJob> general, probes;

    Impl(const LoopLimits& l, Metrics& m, Serve s)
        : limits(l), metrics(m), serve(std::move(s)), general(l.workers, l.workers, [this](ConnectionJob&& j) { work(std::move(j)); }),
          probes(l.probe_workers, kMaxWaitingProbes, [this](ConnectionJob&& j) { work(std::move(j)); }) {
        epfd = ::epoll_create1(EPOLL_CLOEXEC);
        wake = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (epfd < 0 || wake < 0) throw IoError(fmt::format("cannot create the server's event loop: {}", std::strerror(errno)));
        epoll_event ev{EPOLLIN, {.fd = wake}};
        ::epoll_ctl(epfd, EPOLL_CTL_ADD, wake, &ev);
    }

    ~Impl() {
        general.join();
        probes.join();
        for (auto& [fd, c] : conns) ::close(fd);
        for (int fd : {listener, epfd, wake})
            if (fd >= 0) ::close(fd);
    }

    void work(ConnectionJob&& job) {
        serve(job, stopping.load());
        {
            std::lock_guard lock(returned_mu);
            returned.push_back(std::move(job));
        }
        notify();
    }

    void notify() const {
        const uint64_t one = 1;
        [[maybe_unused]] const ssize_t n = ::write(wake, &one, sizeof one);
    }

    void watch(int fd, Conn& c, bool on) {
        if (c.watched == on) return;
        epoll_event ev{EPOLLIN | EPOLLRDHUP, {.fd = fd}};
        ::epoll_ctl(epfd, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, fd, &ev);
        c.watched = on;
    }

    void set_accepting(bool on) {
        if (accepting == on || listener < 0) return;
        epoll_event ev{EPOLLIN, {.fd = listener}};
        ::epoll_ctl(epfd, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, listener, &ev);
        accepting = on;
    }

    static void decrement(std::unordered_map<std::string, size_t>& counts, const std::string& key) {
        auto it = counts.find(key);
        if (it != counts.end() && --it->second == 0) counts.erase(it);
    }

    void close_conn(int fd) {
        auto it = conns.find(fd);
        if (it == conns.end()) return;
        Conn& c = it->second;
        if (c.holds_request) decrement(client_requests, c.client);
        if (c.client.empty()) {
            --lingering_refused;
        } else {
            decrement(client_conns, c.client);
            --counted;
        }
        watch(fd, c, false);
        ::close(fd);
        conns.erase(it);
        metrics.set_open_connections(counted);
    }

    // Stops writing and lets the client's remaining bytes drain before closing.
    void linger(int fd, Conn& c, Clock::time_point now) {
        ::shutdown(fd, SHUT_WR);
        c.phase = Conn::Phase::Lingering;
        c.deadline = now + kLinger;
        c.bytes.clear();
        watch(fd, c, true);
    }

    void answer(int fd, Conn& c, const openai::ApiError& e, const char* reason, Clock::time_point now) {
        metrics.count_rejected(reason);
        send_now(fd, error_response(e));
        linger(fd, c, now);
    }

    void accept_all(Clock::time_point now) {
        for (;;) {
            sockaddr_storage a{};
            socklen_t len = sizeof a;
            const int fd = ::accept4(listener, reinterpret_cast<sockaddr*>(&a), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd < 0) {
                if (errno == EINTR || errno == ECONNABORTED) continue;
                if (errno != EAGAIN && errno != EWOULDBLOCK) {  // out of descriptors or memory: pause accepting a moment
                    set_accepting(false);
                    resume_accept = now + kTick;
                }
                return;
            }
            // Answers go out as headers then body: without this the body waits for the client's
            // delayed acknowledgement of the headers (about 40 ms a request on a kept-alive connection).
            const int one = 1;
            ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            const std::string client = address_text(a);
            Conn& c = conns[fd];
            const bool over_total = counted >= limits.max_connections;
            const bool over_client = !over_total && client_conns[client] >= limits.max_connections_per_client;
            if (over_total || over_client) {
                ++lingering_refused;
                const auto e = over_total ? refusal(503, fmt::format("the server has {} connections open (--max-connections); retry later", counted), "too_many_connections")
                                          : refusal(429, fmt::format("this address has {} connections open (--max-connections-per-client); close some or retry later", client_conns[client]),
                                                    "too_many_connections_from_client");
                if (client_conns[client] == 0) client_conns.erase(client);
                answer(fd, c, e, over_total ? "connections" : "client_connections", now);
                if (lingering_refused > kMaxLingering) close_conn(fd);
                continue;
            }
            c.client = client;
            ++counted;
            ++client_conns[client];
            c.deadline = now + std::min(limits.header_timeout, limits.request_timeout);
            watch(fd, c, true);
            metrics.set_open_connections(counted);
        }
    }

    void on_readable(int fd, Conn& c, Clock::time_point now) {
        char buf[65536];
        const size_t cap = limits.max_header_bytes + limits.max_body + sizeof buf;
        bool eof = false;
        while (c.phase == Conn::Phase::Lingering || c.bytes.size() < cap) {
            const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
            if (n > 0) {
                if (c.phase == Conn::Phase::Reading) c.bytes.append(buf, static_cast<size_t>(n));
                continue;
            }
            if (n < 0 && errno == EINTR) continue;
            eof = n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
            break;
        }
        if (c.phase == Conn::Phase::Lingering) {
            if (eof) close_conn(fd);
            return;
        }
        advance(fd, c, eof, now);
    }

    // Decides what the bytes read so far make: wait for more, a refusal, or a request for a worker.
    void advance(int fd, Conn& c, bool eof, Clock::time_point now) {
        if (c.bytes.empty()) {
            if (eof) close_conn(fd);
            return;
        }
        if (!c.started) {
            c.started = true;
            c.started_at = now;
        }
        const RequestFrame f = frame_request(c.bytes, limits.max_header_bytes, limits.max_body);
        using State = RequestFrame::State;
        switch (f.state) {
            case State::Incomplete:
                c.deadline = c.started_at + (f.header_bytes > 0 ? limits.request_timeout : std::min(limits.header_timeout, limits.request_timeout));
                if (f.expects_continue && !c.continued) {
                    send_now(fd, "HTTP/1.1 100 Continue\r\n\r\n");
                    c.continued = true;
                }
                if (eof) close_conn(fd);  // the client will send no more of it
                return;
            case State::HeadersTooLarge:
                return answer(fd, c, refusal(431, fmt::format("the request's headers exceed {} bytes", limits.max_header_bytes), "headers_too_large"),
                              "too_large", now);
            case State::BodyTooLarge:
                return answer(fd, c, refusal(413, "the request body is larger than the server's --max-body", "request_too_large"), "too_large", now);
            case State::Malformed:
                return answer(fd, c, refusal(400, "the request's Content-Length is not one number", "bad_http_request"), "malformed", now);
            case State::Complete:
                return hand_over(fd, c, is_probe(f), now);
        }
    }

    void hand_over(int fd, Conn& c, bool probe, Clock::time_point now) {
        if (!probe && client_requests.count(c.client) && client_requests[c.client] >= limits.max_requests_per_client)
            return answer(fd, c, refusal(429, fmt::format("this address has {} requests in progress (--max-requests-per-client); retry later", limits.max_requests_per_client),
                                         "too_many_requests_from_client"),
                          "client_requests", now);
        ConnectionJob job{fd, std::move(c.bytes), ConnectionJob::After::Close};
        watch(fd, c, false);
        if (!(probe ? probes : general).submit(job)) {
            c.bytes = std::move(job.bytes);
            return answer(fd, c, refusal(503, "every worker is busy and as many requests wait for one; retry later", "server_busy"), "workers", now);
        }
        c.phase = Conn::Phase::Working;
        c.holds_request = !probe;
        if (!probe) ++client_requests[c.client];
    }

    void take_returned(Clock::time_point now) {
        std::vector<ConnectionJob> jobs;
        {
            std::lock_guard lock(returned_mu);
            jobs.swap(returned);
        }
        for (ConnectionJob& job : jobs) {
            Conn& c = conns.at(job.fd);
            if (c.holds_request) decrement(client_requests, c.client);
            c.holds_request = false;
            c.phase = Conn::Phase::Reading;
            c.started = c.continued = false;
            c.bytes = std::move(job.bytes);
            if (shut || job.after == ConnectionJob::After::Close) {
                close_conn(job.fd);
            } else if (job.after == ConnectionJob::After::Drain) {
                linger(job.fd, c, now);
            } else {
                c.deadline = now + limits.keep_alive;
                watch(job.fd, c, true);
                advance(job.fd, c, false, now);  // a pipelined request may be here already
            }
        }
    }

    void sweep(Clock::time_point now) {
        if (!accepting && !shut && now >= resume_accept) set_accepting(true);
        std::vector<int> due;
        for (const auto& [fd, c] : conns)
            if (c.phase != Conn::Phase::Working && now >= c.deadline) due.push_back(fd);
        for (int fd : due) {
            Conn& c = conns.at(fd);
            if (c.phase == Conn::Phase::Reading && c.started) {
                metrics.count_timed_out();
                answer(fd, c, refusal(408, "the request did not arrive whole in time (--header-timeout, --timeout)", "request_timeout"),
                       "timeout", now);
            } else {
                close_conn(fd);
            }
        }
    }

    // Stop accepting; idle and half-read connections close, requests with a worker finish.
    void shut_down() {
        shut = true;
        set_accepting(false);
        ::close(listener);
        listener = -1;
        std::vector<int> idle;
        for (const auto& [fd, c] : conns)
            if (c.phase != Conn::Phase::Working) idle.push_back(fd);
        for (int fd : idle) close_conn(fd);
    }

    void run() {
        epoll_event events[256];
        auto next_sweep = Clock::now() + kTick;
        for (;;) {
            if (stopping && !shut) shut_down();
            if (shut && conns.empty()) break;
            const int n = ::epoll_wait(epfd, events, 256, static_cast<int>(kTick.count()));
            const auto now = Clock::now();
            for (int i = 0; i < n; ++i) {
                const int fd = events[i].data.fd;
                if (fd == listener) {
                    accept_all(now);
                } else if (fd == wake) {
                    uint64_t count;
                    [[maybe_unused]] const ssize_t r = ::read(wake, &count, sizeof count);
                    take_returned(now);
                } else if (auto it = conns.find(fd); it != conns.end() && it->second.phase != Conn::Phase::Working) {
                    on_readable(fd, it->second, now);
                }
            }
            if (now >= next_sweep) {
                sweep(now);
                next_sweep = now + kTick;
            }
        }
        general.join();
        probes.join();
    }
};

ConnectionLoop::ConnectionLoop(const LoopLimits& limits, Metrics& metrics, Serve serve)
    : impl_(std::make_unique<Impl>(limits, metrics, std::move(serve))) {}

ConnectionLoop::~ConnectionLoop() = default;

void ConnectionLoop::bind(const std::string& host, int port) {
    const auto fail = [&](const std::string& why) {
        return IoError(fmt::format("cannot listen on {}:{}: {}", host, port, why),
                       "the port may be in use or the address not on this machine: choose another with --port or --host");
    };
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    addrinfo* found = nullptr;
    if (const int r = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); r != 0) throw fail(::gai_strerror(r));
    std::string why = "no address";
    int fd = -1;
    for (addrinfo* ai = found; ai && fd < 0; ai = ai->ai_next) {
        fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) continue;
        const int yes = 1;
        ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
        if (::bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(fd, kBacklog) == 0) break;
        why = std::strerror(errno);
        ::close(fd);
        fd = -1;
    }
    ::freeaddrinfo(found);
    if (fd < 0) throw fail(why);
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    impl_->bound_port = ntohs(a.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6&>(a).sin6_port : reinterpret_cast<sockaddr_in&>(a).sin_port);
    impl_->listener = fd;
    impl_->accepting = false;
    impl_->set_accepting(true);
}

int ConnectionLoop::port() const { return impl_->bound_port; }

void ConnectionLoop::run() { impl_->run(); }

void ConnectionLoop::stop() {
    impl_->stopping = true;
    impl_->notify();
}

}  // namespace strata::server
