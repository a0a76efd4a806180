// Anthropic's Messages API on the chat completions machinery: POST /v1/messages is translated
// into the chat request it amounts to (tools/anthropic/request.h), read and submitted as one
// before anything is sent, and answered whole or as the API's events
// (tools/anthropic/response.h); POST /v1/messages/count_tokens counts the prompt it would read.
// Errors take Anthropic's shape (set_route_error).
#include <httplib.h>

#include <chrono>

#include <nlohmann/json.hpp>

#include "tools/anthropic/request.h"
#include "tools/anthropic/response.h"
#include "tools/openai/reply_stream.h"
#include "tools/openai/response.h"
#include "tools/openai/tokenize.h"
#include "tools/server/in_flight.h"
#include "tools/server/server_state.h"

namespace strata::server {

namespace {

using Clock = std::chrono::steady_clock;
using openai::Json;

void respond_whole(const anthropic::Translated& t, const openai::CompletionRequest& creq, const Submitted& s, const httplib::Request& req,
                   httplib::Response& res) {
    if (!s.flight->await_all(*s.gen)) {
        res.status = 499;  // the client left
        return;
    }
    const std::vector<runtime::GenerateResult> results = s.gen->results();
    if (const runtime::GenerateResult* bad = failed(results)) return set_route_error(req.path, res, result_error(*bad));
    const runtime::GenerateResult& r = results[0];
    const openai::Choice c = openai::make_choice(0, r, creq);
    anthropic::MessageWriter w(t.model, static_cast<int64_t>(r.prompt_tokens.size()), r.cached_tokens);
    w.next(t.omit_thinking ? std::string() : c.reasoning, c.text, c.tool_calls);
    w.finish(anthropic::stop_reason(c.finish_reason, r.stop_string, t.stop_sequences), r.stop_string, static_cast<int64_t>(r.tokens.size()),
             r.cached_tokens);
    res.set_content(openai::dump(w.message()), "application/json");
}

void respond_stream(ServerState& state, const anthropic::Translated& t, const openai::CompletionRequest& creq, const Submitted& s,
                    Clock::time_point arrived, httplib::Response& res) {
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    res.set_chunked_content_provider("text/event-stream", [&state, t, creq, s, arrived](size_t, httplib::DataSink& sink) {
        // The prompt's cached part is known once the reply is; message_start counts it all as input.
        anthropic::MessageWriter w(t.model, static_cast<int64_t>(creq.prompt.size()), 0);
        const auto send = [&](const std::string& events) { return events.empty() || sink.write(events.data(), events.size()); };
        bool called = false;
        if (!send(w.start())) return false;
        const auto results = stream_one_reply(state, s, creq, arrived, [&](const openai::ReplyStream::Delta& d) {
            called = called || !d.calls.empty();
            return send(w.next(t.omit_thinking ? std::string_view() : std::string_view(d.reasoning), d.content, d.calls));
        });
        if (!results) return false;
        bool ok = false;
        if (const runtime::GenerateResult* bad = failed(*results)) {
            const openai::ApiError e = result_error(*bad);
            ok = send(anthropic::MessageWriter::error(e.status(), e.what()));
        } else {
            const runtime::GenerateResult& r = (*results)[0];
            // Cut at its length, calls or not (its last call may be missing), as a whole answer is.
            const std::string reason = openai::finish_reason(r.stop_reason);
            const std::string finish = called && reason != "length" ? "tool_calls" : reason;
            ok = send(w.finish(anthropic::stop_reason(finish, r.stop_string, t.stop_sequences), r.stop_string,
                               static_cast<int64_t>(r.tokens.size()), r.cached_tokens));
        }
        if (ok) sink.done();
        return ok;
    });
}

void handle_messages(ServerState& state, const httplib::Request& req, httplib::Response& res) {
    const auto arrived = Clock::now();
    anthropic::Translated t;
    openai::CompletionRequest creq;
    Submitted s;
    try {
        t = anthropic::translate(openai::parse_json_limited(req.body, "the request body", "invalid_json"));
        const std::shared_ptr<LoadedModel> model = requested_model(state, t.body);
        creq = openai::parse_completion_request(openai::Endpoint::Chat, t.body, model->context);
        s = submit_completion(state, model, creq, req.remote_addr);
    } catch (const openai::ApiError& e) {
        return set_route_error(req.path, res, e);
    }
    if (t.stream)
        respond_stream(state, t, creq, s, arrived, res);
    else
        respond_whole(t, creq, s, req, res);
}

void handle_count_tokens(ServerState& state, const httplib::Request& req, httplib::Response& res) {
    try {
        const anthropic::Translated t =
            anthropic::translate(openai::parse_json_limited(req.body, "the request body", "invalid_json"), /*counting=*/true);
        const std::shared_ptr<LoadedModel> model = requested_model(state, t.body);
        res.set_content(openai::dump({{"input_tokens", openai::chat_prompt_tokens(t.body, model->context)}}), "application/json");
    } catch (const openai::ApiError& e) {
        set_route_error(req.path, res, e);
    }
}

}  // namespace

void add_anthropic_routes(httplib::Server& http, ServerState& state) {
    post_route(http, "/v1/messages", [&state](const httplib::Request& req, httplib::Response& res) { handle_messages(state, req, res); });
    post_route(http, "/v1/messages/count_tokens",
               [&state](const httplib::Request& req, httplib::Response& res) { handle_count_tokens(state, req, res); });
}

}  // namespace strata::server
