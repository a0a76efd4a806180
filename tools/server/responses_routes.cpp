// POST /v1/responses: OpenAI's Responses API on the chat completions machinery. The request is
// translated into the chat request it amounts to (tools/responses/request.h), read and submitted
// as one, before anything is sent, so every refusal is a plain JSON error naming the Responses
// API's field; then the answer is awaited whole or streamed as the API's events
// (tools/responses/response.h). A client that goes away cancels its sequence.
#include <httplib.h>

#include <chrono>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "models/tokenizer.h"
#include "tools/openai/reply_stream.h"
#include "tools/openai/response.h"
#include "tools/responses/request.h"
#include "tools/responses/response.h"
#include "tools/server/in_flight.h"
#include "tools/server/server_state.h"

namespace strata::server {

namespace {

using Clock = std::chrono::steady_clock;
using openai::Json;

// A refusal of the chat request, naming the Responses API's field it came from: the chat's
// messages are the input's items (an index among them is not the input's: instructions and
// merged items shift it), a function tool's fields are flat.
openai::ApiError in_responses_terms(const openai::ApiError& e) {
    static const std::pair<std::string_view, std::string_view> kPrefixes[] = {
        {"max_tokens", "max_output_tokens"}, {"messages", "input"}, {"response_format", "text.format"},
        {"reasoning_effort", "reasoning.effort"}};
    std::string param = e.param();
    for (const auto& [chat, here] : kPrefixes)
        if (param.starts_with(chat)) param = std::string(here);
    if (const size_t at = param.find("].function."); param.starts_with("tools[") && at != std::string::npos) param.erase(at + 1, 9);
    return openai::ApiError(e.status(), e.what(), e.type(), param, e.code());
}

// Usage with the reasoning's tokens counted as the model's tokenizer reads its text.
Json usage(const std::vector<runtime::GenerateResult>& results, const std::string& reasoning, const models::Tokenizer& tok) {
    const int64_t reasoning_tokens = reasoning.empty() ? 0 : static_cast<int64_t>(tok.encode(reasoning, false, false).size());
    return responses::usage_json(openai::usage_json(results), reasoning_tokens);
}

void respond_whole(const LoadedModel& model, const responses::Translated& t, const openai::CompletionRequest& creq, const Submitted& s,
                   httplib::Response& res) {
    if (!s.flight->await_all(*s.gen)) {
        res.status = 499;  // the client left
        return;
    }
    const std::vector<runtime::GenerateResult> results = s.gen->results();
    if (const runtime::GenerateResult* bad = failed(results)) return set_error(res, result_error(*bad));
    const openai::Choice c = openai::make_choice(0, results[0], creq);
    responses::ResponseWriter w(creq.model, t.echo);
    w.next(c.reasoning, c.text, c.tool_calls);
    w.finish(c.finish_reason == "length", usage(results, c.reasoning, model.context.tokenizer));
    res.set_content(openai::dump(w.response()), "application/json");
}

void respond_stream(ServerState& state, const std::shared_ptr<LoadedModel>& model, const responses::Translated& t,
                    const openai::CompletionRequest& creq, const Submitted& s, Clock::time_point arrived, httplib::Response& res) {
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    const Json echo = t.echo;
    res.set_chunked_content_provider("text/event-stream", [&state, model, echo, creq, s, arrived](size_t, httplib::DataSink& sink) {
        responses::ResponseWriter w(creq.model, echo);
        const auto send = [&](const std::string& events) { return events.empty() || sink.write(events.data(), events.size()); };
        std::string reasoning;
        if (!send(w.start())) return false;
        const auto results = stream_one_reply(state, s, creq, arrived, [&](const openai::ReplyStream::Delta& d) {
            reasoning += d.reasoning;
            return send(w.next(d.reasoning, d.content, d.calls));
        });
        if (!results) return false;
        bool ok = false;
        if (const runtime::GenerateResult* bad = failed(*results)) {
            const openai::ApiError e = result_error(*bad);
            ok = send(w.fail(e.code().empty() ? "server_error" : e.code(), e.what()));
        } else {
            // Cut at its length, calls or not (its last call may be missing), as a whole answer is.
            const bool cut = openai::finish_reason((*results)[0].stop_reason) == "length";
            ok = send(w.finish(cut, usage(*results, reasoning, model->context.tokenizer)));
        }
        if (ok) sink.done();
        return ok;
    });
}

}  // namespace

void handle_responses(ServerState& state, const httplib::Request& req, httplib::Response& res) {
    const auto arrived = Clock::now();
    responses::Translated t;
    std::shared_ptr<LoadedModel> model;
    openai::CompletionRequest creq;
    Submitted s;
    try {
        t = responses::translate(openai::parse_json_limited(req.body, "the request body", "invalid_json"));
        model = requested_model(state, t.body);
        creq = openai::parse_completion_request(openai::Endpoint::Chat, t.body, model->context);
        s = submit_completion(state, model, creq, req.remote_addr);
    } catch (const openai::ApiError& e) {
        return set_error(res, in_responses_terms(e));
    }
    if (t.stream)
        respond_stream(state, model, t, creq, s, arrived, res);
    else
        respond_whole(*model, t, creq, s, res);
}

}  // namespace strata::server
