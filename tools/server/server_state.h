#pragma once
// What every route of the API server shares: the models by name, the metrics and the
// requests in flight (so that shutdown can cancel them).
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>
#include <set>
#include <utility>

#include "runtime/scheduler.h"
#include "tools/openai/api_error.h"
#include "tools/openai/embeddings.h"
#include "tools/openai/json_fields.h"
#include "tools/openai/request.h"
#include "tools/server/metrics.h"
#include "tools/server/model_registry.h"

namespace httplib {
struct Request;
struct Response;
class Server;
}  // namespace httplib

namespace strata::server {

struct ServerState {
    explicit ServerState(ModelRegistry& m) : models(m) {}

    ModelRegistry& models;
    Metrics metrics;
    std::atomic<bool> stopping{false};  // set when the server stops accepting: long streams end

    // A scheduler request in flight (its scheduler stays alive: the request's lease holds its model).
    void track(runtime::Scheduler& s, uint64_t id);
    void untrack(runtime::Scheduler& s, uint64_t id);
    size_t in_flight() const;
    void cancel_all();

private:
    mutable std::mutex mu_;
    std::set<std::pair<runtime::Scheduler*, uint64_t>> in_flight_;
};

// The model a request body names in `model` (the default one when it names none), loaded if
// it is not. Throws ApiError: 400 for a `model` that is not a string, and as ModelRegistry::acquire.
std::shared_ptr<LoadedModel> requested_model(ServerState& state, const openai::Json& body,
                                             std::optional<std::chrono::seconds> keep_alive = {});

// Registers a POST route whose handler finds the whole body in req.body. The handler reads it
// itself, not httplib: httplib answers 413 to a form-encoded body past its compiled-in 8 KiB
// (CPPHTTPLIB_FORM_URL_ENCODED_PAYLOAD_MAX_LENGTH), whatever --max-body allows, and curl's -d sends
// that content type. The connection loop has already held the body to --max-body.
void post_route(httplib::Server& http, const std::string& pattern, std::function<void(const httplib::Request&, httplib::Response&)> handler);

// GET /v1/models (every model served, loaded or not) and GET /v1/models/{id} (404 model_not_found).
void handle_models(ServerState& state, httplib::Response& res);
void handle_model(ServerState& state, const std::string& id, httplib::Response& res);
// Ollama's API: /api/tags, /api/show, /api/ps, /api/version, /api/chat, /api/generate, /api/embed, /api/embeddings.
void add_ollama_routes(httplib::Server& http, ServerState& state);
// Anthropic's Messages API: POST /v1/messages and /v1/messages/count_tokens.
void add_anthropic_routes(httplib::Server& http, ServerState& state);

// POST /v1/chat/completions and /v1/completions, streamed (SSE) or not.
void handle_completion(ServerState& state, openai::Endpoint endpoint, const httplib::Request& req, httplib::Response& res);
// POST /v1/responses (OpenAI's Responses API, answered by the chat machinery).
void handle_responses(ServerState& state, const httplib::Request& req, httplib::Response& res);
// POST /v1/embeddings.
void handle_embeddings(ServerState& state, const httplib::Request& req, httplib::Response& res);
// Each input's embedding on the model's scheduler, a few at a time; nullopt when the client left.
// Throws ApiError (429, 503, 400, or 500 for a failed embedding).
std::optional<std::vector<runtime::GenerateResult>> run_embeddings(ServerState& state, const std::shared_ptr<LoadedModel>& model,
                                                                  const openai::EmbeddingRequest& ereq, const std::string& client);
// POST /tokenize, /detokenize and /apply-template (llama.cpp's server).
void handle_tokenize(ServerState& state, const httplib::Request& req, httplib::Response& res);
void handle_detokenize(ServerState& state, const httplib::Request& req, httplib::Response& res);
void handle_apply_template(ServerState& state, const httplib::Request& req, httplib::Response& res);
// Sets the response to an error in OpenAI's shape (a 429 or 503 with Retry-After).
void set_error(httplib::Response& res, const openai::ApiError& e);
// The same in the shape the path's API speaks: Ollama's {"error": "message"} under /api/, Anthropic's
// {"type": "error", "error": {"type", "message"}} under /v1/messages, else OpenAI's.
void set_route_error(const std::string& path, httplib::Response& res, const openai::ApiError& e);

}  // namespace strata::server
