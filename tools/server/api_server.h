#pragma once
// The OpenAI-compatible HTTP server behind `strata serve`: routes, API key, limits, and a
// bounded pool of connection threads over one Scheduler. cpp-httplib stays inside the .cpp.
#include <cstddef>
#include <memory>
#include <string>

#include "runtime/scheduler.h"
#include "tools/openai/request.h"

namespace strata::server {

struct ServerConfig {
    std::string host = "127.0.0.1";
    int port = 8080;            // 0: any free port
    std::string api_key;        // empty: no authentication
    size_t max_body = 1 << 20;  // larger request bodies get 413
    int threads = 16;           // connection threads (each streaming client holds one)
    int timeout_s = 30;         // reading a request, writing to a client that does not read
};

class ApiServer {
public:
    ApiServer(const ServerConfig& config, runtime::Scheduler& scheduler, const openai::ModelContext& model,
              const storage::MemoryBudget& dram);
    ~ApiServer();

    // Binds the listening socket; throws IoError when the address is taken or invalid.
    void bind();
    int port() const;
    // Serves until stop_accepting(); returns once every connection thread is done.
    void run();
    // Closes the listening socket; requests in flight go on.
    void stop_accepting();
    // Requests submitted and not yet finished.
    size_t in_flight() const;
    void cancel_in_flight();

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace strata::server
