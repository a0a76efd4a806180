// POST /v1/chat/completions and /v1/completions. The request is read and submitted before
// anything is sent, so every refusal (400, 429) is a plain JSON error; then the answer is
// either awaited whole or streamed as server-sent events while it is generated. A client
// that goes away cancels its sequence.
#include <httplib.h>

#include <chrono>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/log.h"
#include "tools/openai/response.h"
#include "tools/server/generation.h"
#include "tools/server/peer_socket.h"
#include "tools/server/server_state.h"

namespace strata::server {

namespace {

using Clock = std::chrono::steady_clock;
// How often a waiting connection looks for its client having gone.
constexpr std::chrono::milliseconds kPoll{100};

// A submitted request: untracked and, unless it finished, cancelled when this goes away
// (the client left, a write failed, the handler threw).
class InFlight {
public:
    InFlight(ServerState& state, uint64_t id, int fd) : state_(state), id_(id), fd_(fd) { state_.track(id_); }
    ~InFlight() {
        if (!finished_) state_.scheduler.cancel(id_);
        state_.untrack(id_);
    }
    InFlight(const InFlight&) = delete;
    InFlight& operator=(const InFlight&) = delete;

    bool client_gone() const { return peer_closed(fd_); }
    void cancel() {
        state_.scheduler.cancel(id_);
        state_.metrics.count_cancelled();
    }
    void finished() { finished_ = true; }

private:
    ServerState& state_;
    uint64_t id_;
    int fd_;
    bool finished_ = false;
};

openai::ApiError result_error(const runtime::GenerateResult& r) {
    if (r.stop_reason == "cancelled")
        return openai::ApiError(503, "the request was cancelled: the server is shutting down", "server_error", {}, "cancelled");
    return openai::ApiError(500, "generation failed: " + r.error, "server_error", {}, "generation_failed");
}

std::string sse(const nlohmann::json& j) { return "data: " + openai::dump(j) + "\n\n"; }

void respond_whole(ServerState& state, const openai::CompletionRequest& creq, const std::shared_ptr<Generation>& gen,
                   std::shared_ptr<InFlight> flight, httplib::Response& res) {
    const auto meta = openai::CompletionMeta::make(creq.endpoint, creq.model);
    for (;;) {
        if (gen->wait(kPoll).done) break;
        if (flight->client_gone()) {
            flight->cancel();
            res.status = 499;  // nobody reads it; counted as such in the metrics
            return;
        }
    }
    flight->finished();
    const runtime::GenerateResult& r = gen->result();
    if (r.stop_reason == "cancelled" || r.stop_reason == "error") return set_error(res, result_error(r));
    res.set_content(openai::dump(openai::completion_json(meta, r)), "application/json");
}

void respond_stream(ServerState& state, const openai::CompletionRequest& creq, const std::shared_ptr<Generation>& gen,
                    std::shared_ptr<InFlight> flight, Clock::time_point arrived, httplib::Response& res) {
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    const auto meta = openai::CompletionMeta::make(creq.endpoint, creq.model);
    const bool include_usage = creq.include_usage;
    res.set_chunked_content_provider(
        "text/event-stream",
        [&state, gen, flight, meta, include_usage, arrived](size_t, httplib::DataSink& sink) {
            const auto send = [&](const std::string& event) { return sink.write(event.data(), event.size()); };
            bool first = true;
            for (;;) {
                Generation::Update u = gen->wait(kPoll);
                if (!u.text.empty()) {
                    if (first) state.metrics.observe_first_token(std::chrono::duration<double>(Clock::now() - arrived).count());
                    if (!send(sse(openai::text_chunk_json(meta, u.text, first)))) {
                        flight->cancel();
                        return false;
                    }
                    first = false;
                }
                if (u.done) break;
                if (flight->client_gone()) {
                    flight->cancel();
                    return false;
                }
            }
            flight->finished();
            const runtime::GenerateResult& r = gen->result();
            if (r.stop_reason == "cancelled") {  // shutdown: the stream just ends
                sink.done();
                return true;
            }
            bool ok = true;
            if (r.stop_reason == "error") {
                ok = send(sse(result_error(r).to_json()));
            } else {
                ok = send(sse(openai::final_chunk_json(meta, openai::finish_reason(r.stop_reason))));
                if (ok && include_usage) ok = send(sse(openai::usage_chunk_json(meta, r)));
            }
            if (ok) ok = send("data: [DONE]\n\n");
            if (ok) sink.done();
            return ok;
        });
}

}  // namespace

void set_error(httplib::Response& res, const openai::ApiError& e) {
    res.status = e.status();
    res.set_content(openai::dump(e.to_json()), "application/json");
}

void handle_completion(ServerState& state, openai::Endpoint endpoint, const httplib::Request& req, httplib::Response& res) {
    const auto arrived = Clock::now();
    openai::CompletionRequest creq;
    try {
        creq = openai::parse_completion_request(endpoint, std::string_view(req.body), state.model);
    } catch (const openai::ApiError& e) {
        return set_error(res, e);
    }
    auto gen = std::make_shared<Generation>();
    uint64_t id = 0;
    try {
        id = state.scheduler.submit(Generation::request(gen, std::move(creq.prompt), creq.params));
    } catch (const runtime::QueueFull& e) {
        res.set_header("Retry-After", "1");
        return set_error(res, openai::ApiError(429, std::string("the server is busy: ") + e.what() + "; retry later",
                                               "rate_limit_error", {}, "queue_full"));
    } catch (const UsageError& e) {
        return set_error(res, openai::invalid_request(e.what(), {}, "context_length_exceeded"));
    }
    auto flight = std::make_shared<InFlight>(state, id, current_connection_socket());
    if (creq.stream)
        respond_stream(state, creq, gen, std::move(flight), arrived, res);
    else
        respond_whole(state, creq, gen, std::move(flight), res);
}

}  // namespace strata::server
