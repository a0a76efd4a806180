#pragma once
// What every route of the API server shares: the scheduler, the model, the metrics and the
// ids of the requests in flight (so that shutdown can cancel them).
#include <atomic>
#include <cstdint>
#include <mutex>
#include <set>

#include "runtime/scheduler.h"
#include "storage/budget.h"
#include "tools/openai/api_error.h"
#include "tools/openai/request.h"
#include "tools/server/metrics.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace strata::server {

struct ServerState {
    ServerState(runtime::Scheduler& s, const openai::ModelContext& m, const storage::MemoryBudget& d) : scheduler(s), model(m), dram(d) {}

    runtime::Scheduler& scheduler;
    openai::ModelContext model;
    const storage::MemoryBudget& dram;
    Metrics metrics;
    std::atomic<bool> stopping{false};  // set when the server stops accepting: long streams end

    void track(uint64_t id);
    void untrack(uint64_t id);
    size_t in_flight() const;
    void cancel_all();

private:
    mutable std::mutex mu_;
    std::set<uint64_t> in_flight_;
};

// POST /v1/chat/completions and /v1/completions, streamed (SSE) or not.
void handle_completion(ServerState& state, openai::Endpoint endpoint, const httplib::Request& req, httplib::Response& res);
// POST /v1/embeddings.
void handle_embeddings(ServerState& state, const httplib::Request& req, httplib::Response& res);
// POST /tokenize, /detokenize and /apply-template (llama.cpp's server).
void handle_tokenize(ServerState& state, const httplib::Request& req, httplib::Response& res);
void handle_detokenize(ServerState& state, const httplib::Request& req, httplib::Response& res);
void handle_apply_template(ServerState& state, const httplib::Request& req, httplib::Response& res);
// Sets the response to an error in OpenAI's shape (a 429 or 503 with Retry-After).
void set_error(httplib::Response& res, const openai::ApiError& e);

}  // namespace strata::server
