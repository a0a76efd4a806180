// POST /v1/chat/completions and /v1/completions. The request is read and submitted (one
// scheduler request per choice, the later ones admitted once the first has the prompt in the
// KV cache) before anything is sent, so every refusal (400, 429, 503) is a plain JSON error; then the
// answer is either awaited whole or streamed as server-sent events while it is generated. A
// client that goes away cancels its sequences.
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <span>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/log.h"
#include "runtime/engine.h"
#include "runtime/logprobs.h"
#include "runtime/text_stream.h"
#include "tools/anthropic/response.h"
#include "tools/openai/response.h"
#include "tools/openai/reply_stream.h"
#include "tools/server/generation.h"
#include "tools/server/in_flight.h"
#include "tools/server/peer_socket.h"
#include "tools/server/server_state.h"

namespace strata::server {

namespace {

using Clock = std::chrono::steady_clock;

std::string sse(const openai::Json& j) { return "data: " + openai::dump(j) + "\n\n"; }

// The usage of an answer with the plan's price of it beside the measured timings: the model was
// placed once, for a prompt filling its context; each request is priced for what it was (the
// prompt tokens evaluated, the tokens generated, its choices decoding together).
openai::Json priced_usage(const LoadedModel& model, std::span<const runtime::GenerateResult> results) {
    openai::Json usage = openai::usage_json(results);
    const int evaluated = usage["prompt_tokens"].get<int>() - usage["prompt_tokens_details"]["cached_tokens"].get<int>();
    const int choices = std::max<int>(1, static_cast<int>(results.size()));
    const planner::Prediction p =
        model.engine->predict(evaluated, std::max(1, usage["completion_tokens"].get<int>() / choices), choices);
    usage["timings"]["predicted"] = {{"prefill_seconds", p.ttft_s}, {"decode_tokens_per_s", p.decode_tps_per_seq}};
    return usage;
}

void respond_whole(const LoadedModel& model, const openai::CompletionRequest& creq, const std::shared_ptr<Generation>& gen,
                   const std::shared_ptr<InFlight>& flight, httplib::Response& res) {
    const auto meta = openai::CompletionMeta::make(creq.endpoint, creq.model);
    if (!flight->await_all(*gen)) {
        res.status = 499;  // nobody reads it; counted as such in the metrics
        return;
    }
    const std::vector<runtime::GenerateResult> results = gen->results();
    if (const runtime::GenerateResult* bad = failed(results)) return set_error(res, result_error(*bad));
    std::vector<openai::Choice> choices;
    for (size_t i = 0; i < results.size(); ++i)
        choices.push_back(openai::make_choice(static_cast<int>(i), results[i], creq));
    res.set_content(openai::dump(openai::completion_json(meta, choices, priced_usage(model, results), model.context.tokenizer)),
                    "application/json");
}

// What one choice of a streamed answer has sent.
struct ChoiceStream {
    bool first = true;
    size_t text_offset = 0;  // completions' logprobs count offsets (in characters) into the choice's text
    size_t text_bytes = 0;   // of the text generated so far
    std::optional<openai::ReplyStream> reply;        // chat: its reasoning and calls apart
    std::optional<runtime::ShownLogprobs> logprobs;  // held until their tokens' text is sent
};

void respond_stream(ServerState& state, const std::shared_ptr<LoadedModel>& model, const openai::CompletionRequest& creq,
                    const std::shared_ptr<Generation>& gen, const std::shared_ptr<InFlight>& flight, Clock::time_point arrived,
                    httplib::Response& res) {
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    const auto meta = openai::CompletionMeta::make(creq.endpoint, creq.model);
    res.set_chunked_content_provider("text/event-stream", [&state, model, creq, gen, flight, meta, arrived](size_t, httplib::DataSink& sink) {
        const auto send = [&](openai::Json event) {
            // With include_usage every chunk before the last carries "usage": null, as OpenAI's do.
            if (creq.include_usage && event.contains("choices") && !event.contains("usage")) event["usage"] = nullptr;
            const std::string text = sse(event);
            return sink.write(text.data(), text.size());
        };
        const models::Tokenizer& tok = model->context.tokenizer;
        std::vector<ChoiceStream> choices(static_cast<size_t>(creq.n));
        for (auto& c : choices) c.reply.emplace(creq);
        if (creq.params.n_logprobs >= 0)
            for (auto& c : choices) c.logprobs.emplace([&tok](int32_t t) { return tok.piece(t).size(); });
        bool any_text = false, ok = true;
        // One choice's news as chunks: text (with its tokens' log-probabilities), then calls.
        const auto forward = [&](const Generation::Update& u) {
            ChoiceStream& c = choices[static_cast<size_t>(u.index)];
            openai::Json lp = nullptr;
            if (c.logprobs) {
                c.logprobs->add(u.logprobs);
                c.text_bytes += u.text.size();
                if (const auto shown = c.logprobs->take(c.text_bytes); !shown.empty()) {
                    lp = openai::logprobs_json(creq.endpoint, shown, tok, c.text_offset);
                    for (const auto& t : shown) c.text_offset += runtime::utf8_characters(tok.piece(t.chosen.token));
                }
            }
            const openai::ReplyStream::Delta d = c.reply->next(u.text, u.done, u.cut);
            if (!d.content.empty() || !d.reasoning.empty() || !lp.is_null()) {
                if (!any_text) state.metrics.observe_first_token(std::chrono::duration<double>(Clock::now() - arrived).count());
                any_text = true;
                if (!send(openai::text_chunk_json(meta, u.index, d.content, c.first, lp, d.reasoning))) return false;
                c.first = false;
            }
            if (!d.calls.empty()) {
                if (!send(openai::tool_calls_chunk_json(meta, u.index, d.calls, d.first, c.first))) return false;
                c.first = false;
            }
            return true;
        };
        // Each choice's news as it comes; a choice that ends badly ends the stream. The stream ends
        // once every choice's end has been forwarded: a choice can finish between two waits, and its
        // last text is news still to send.
        size_t ended = 0;
        const bool answered = flight->await([&] {
            for (const Generation::Update& u : gen->wait(kPoll)) {
                if (!forward(u)) {
                    ok = false;
                    return true;
                }
                if (!u.done) continue;
                ++ended;
                const runtime::GenerateResult r = gen->results()[static_cast<size_t>(u.index)];
                if (r.stop_reason == "cancelled" || r.stop_reason == "error") return true;
                const ChoiceStream& c = choices[static_cast<size_t>(u.index)];
                std::string reason = openai::finish_reason(r.stop_reason);
                if (c.reply->called() && reason == "stop") reason = "tool_calls";
                if (!send(openai::final_chunk_json(meta, u.index, reason))) {
                    ok = false;
                    return true;
                }
            }
            return ended == choices.size();
        });
        if (!answered || !ok) {
            if (answered) flight->cancel();  // a write failed: the client is gone
            return false;
        }
        if (gen->all_done()) flight->finished();
        const std::vector<runtime::GenerateResult> results = gen->results();
        if (const runtime::GenerateResult* bad = failed(results)) {
            ok = send(result_error(*bad).to_json());  // cancelled by shutdown or failed: said, then [DONE]
        } else if (creq.include_usage) {
            ok = send(openai::usage_chunk_json(meta, priced_usage(*model, results)));
        }
        if (ok) ok = sink.write("data: [DONE]\n\n", 14);
        if (ok) sink.done();
        return ok;
    });
}

}  // namespace

void set_error(httplib::Response& res, const openai::ApiError& e) {
    res.status = e.status();
    if (e.status() == 429 || e.status() == 503) res.set_header("Retry-After", "1");
    res.set_content(openai::dump(e.to_json()), "application/json");
}

void set_route_error(const std::string& path, httplib::Response& res, const openai::ApiError& e) {
    set_error(res, e);
    if (path.starts_with("/v1/messages")) return res.set_content(openai::dump(anthropic::error_json(e.status(), e.what())), "application/json");
    if (!path.starts_with("/api/")) return;
    // Ollama's clients match "not found" and list models at /api/tags.
    std::string message = e.what();
    if (e.code() == "model_not_found") message = fmt::format("model not found: {}", message);
    if (const size_t at = message.find("GET /v1/models"); at != std::string::npos) message.replace(at, 14, "GET /api/tags");
    res.set_content(openai::dump({{"error", message}}), "application/json");
}

void handle_completion(ServerState& state, openai::Endpoint endpoint, const httplib::Request& req, httplib::Response& res) {
    const auto arrived = Clock::now();
    openai::CompletionRequest creq;
    std::shared_ptr<LoadedModel> model;
    try {
        const openai::Json body = openai::parse_json_limited(req.body, "the request body", "invalid_json");
        model = requested_model(state, body);
        creq = openai::parse_completion_request(endpoint, body, model->context);
    } catch (const openai::ApiError& e) {
        return set_error(res, e);
    }
    Submitted s;
    try {
        s = submit_completion(state, model, creq, req.remote_addr);
    } catch (const openai::ApiError& e) {
        return set_error(res, e);
    }
    if (creq.stream)
        respond_stream(state, model, creq, s.gen, s.flight, arrived, res);
    else
        respond_whole(*model, creq, s.gen, s.flight, res);
}

}  // namespace strata::server
