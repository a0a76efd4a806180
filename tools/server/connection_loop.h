#pragma once
// The API server's connections on one epoll thread. It accepts, holds the connection limits
// (in all, and per client address), reads each request without blocking until it is whole
// (the headers within the header deadline, all of it within the request deadline, within the
// size limits) and only then hands it to a worker; a worker gives the connection back after
// its answer, so an idle keep-alive connection or a slow client costs a descriptor and a
// buffer, never a thread. Refusals (over a limit, no worker free, too slow, too large) are
// answered by the loop itself at once, with Retry-After where trying again can help.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "tools/server/metrics.h"

namespace strata::server {

struct LoopLimits {
    size_t max_connections = 1024;          // open at once, in all
    size_t max_connections_per_client = 128;  // open at once from one address
    size_t max_requests_per_client = SIZE_MAX;  // with a worker at once from one address (probes aside)
    std::chrono::milliseconds header_timeout{10'000};   // request line and headers, from their first byte
    std::chrono::milliseconds request_timeout{30'000};  // the whole request, from its first byte
    std::chrono::milliseconds keep_alive{5'000};        // idle between requests
    size_t max_header_bytes = 64 << 10;
    size_t max_body = 1 << 20;
    size_t workers = 16;       // general requests served at once
    size_t probe_workers = 2;  // reserved for /health, /metrics, /v1/models
};

// A connection with a whole request, on its way through a worker.
struct ConnectionJob {
    int fd = -1;
    std::string bytes;  // in: the request and anything sent after it; out: what is left unread
    enum class After { KeepAlive, Close, Drain } after = After::Close;
};

class ConnectionLoop {
public:
    // Called on a worker thread; `last`: the server is stopping, so the answer closes the connection.
    using Serve = std::function<void(ConnectionJob& job, bool last)>;

    ConnectionLoop(const LoopLimits& limits, Metrics& metrics, Serve serve);
    ~ConnectionLoop();

    // Listens on host:port (0: any free port); throws IoError when it cannot.
    void bind(const std::string& host, int port);
    int port() const;
    // Serves until stop(); returns once every connection is closed and the workers have ended.
    void run();
    // Stops accepting and closes idle connections; requests with a worker finish. Any thread.
    void stop();

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace strata::server
