#pragma once
// The HTTP server behind `strata serve`: OpenAI's API and Ollama's over the models of a
// ModelRegistry (each loaded model its own Scheduler), routes, API key, CORS, limits; an event
// loop holds the connections and bounded worker threads answer whole requests. cpp-httplib
// stays inside the .cpp files.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tools/server/model_registry.h"

namespace strata::server {

struct ServerConfig {
    std::string host = "127.0.0.1";
    int port = 8080;            // 0: any free port
    std::string api_key;        // empty: no authentication
    size_t max_body = 1 << 20;  // larger request bodies get 413
    int threads = 16;           // worker threads: requests answered at once (each streaming client holds one)
    int timeout_s = 30;         // reading a whole request, writing to a client that does not read
    int header_timeout_s = 10;  // reading a request's line and headers
    size_t max_connections = 1024;            // open at once; more get 503
    size_t max_connections_per_client = 128;  // open at once from one address; more get 429
    size_t max_requests_per_client = SIZE_MAX;  // answered at once for one address; more get 429
    std::vector<std::string> cors_origins;    // pages elsewhere that may call the server (tools/server/cors.h)
    std::vector<std::string> allowed_hosts;   // Host names a loopback-bound server answers besides loopback ones (cors.h)
};

class ApiServer {
public:
    // Throws UsageError for a --cors-origin that is not allowed.
    ApiServer(const ServerConfig& config, ModelRegistry& models);
    ~ApiServer();

    // Binds the listening socket; throws IoError when the address is taken or invalid.
    void bind();
    int port() const;
    // Serves until stop_accepting(); returns once every connection is closed.
    void run();
    // Closes the listening socket and idle connections; requests in flight go on. Any thread.
    void stop_accepting();
    // Requests submitted and not yet finished.
    size_t in_flight() const;
    void cancel_in_flight();

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace strata::server
