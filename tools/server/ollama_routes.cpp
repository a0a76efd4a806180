// Ollama's API on the same models and schedulers as OpenAI's: each request is translated into
// the OpenAI request it amounts to (tools/ollama/request.h), run as one, and answered in
// Ollama's shapes (tools/ollama/response.h): whole, or streamed as newline-delimited JSON.
#include <httplib.h>

#include <chrono>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "models/gguf_file.h"
#include "tools/ollama/request.h"
#include "tools/ollama/response.h"
#include "tools/openai/model_list.h"
#include "tools/openai/response.h"
#include "tools/openai/reply_stream.h"
#include "tools/server/in_flight.h"
#include "tools/server/server_state.h"
#include "tools/version.h"

namespace strata::server {

namespace {

using ollama::Api;
using openai::Json;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

void send_json(httplib::Response& res, const Json& j) { res.set_content(openai::dump(j), "application/json"); }

// The model a request names, leased, and how long loading it took this request.
std::shared_ptr<LoadedModel> lease(ServerState& state, const std::string& name, std::optional<std::chrono::seconds> keep_alive,
                                   double& load_seconds) {
    const auto started = Clock::now();
    std::shared_ptr<LoadedModel> model = state.models.acquire(name, keep_alive);
    load_seconds = seconds_since(started);
    return model;
}

void stream_reply(ServerState& state, Api api, const ollama::Translated& t, const openai::CompletionRequest& creq, const Submitted& s,
                  Clock::time_point arrived, double load_seconds, httplib::Response& res) {
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    const std::string name = t.model;
    const bool show_thinking = t.show_thinking;
    res.set_chunked_content_provider("application/x-ndjson", [&state, api, name, show_thinking, creq, s, arrived, load_seconds](
                                                                 size_t, httplib::DataSink& sink) {
        const auto send = [&](const Json& item) {
            const std::string line = openai::dump(item) + "\n";
            return sink.write(line.data(), line.size());
        };
        const auto results = stream_one_reply(state, s, creq, arrived, [&](openai::ReplyStream::Delta d) {
            if (!show_thinking) d.reasoning.clear();
            return (d.content.empty() && d.calls.empty() && d.reasoning.empty()) || send(ollama::item_json(api, name, d.content, d.calls, d.reasoning));
        });
        if (!results) return false;
        const runtime::GenerateResult* bad = failed(*results);
        const bool ok = bad ? send({{"error", result_error(*bad).what()}})  // how Ollama reports an error mid-stream
                            : send(ollama::done_json(api, name, (*results)[0], {seconds_since(arrived), load_seconds}));
        if (ok) sink.done();
        return ok;
    });
}

void handle_generate(ServerState& state, Api api, const httplib::Request& req, httplib::Response& res) {
    const auto arrived = Clock::now();
    try {
        const Json body = openai::parse_json_limited(req.body, "the request body", "invalid_json");
        ollama::Translated t = api == Api::Chat ? ollama::translate_chat(body) : ollama::translate_generate(body);
        if (t.load_only && t.keep_alive && t.keep_alive->count() == 0) {  // Ollama's way to unload a model
            if (!state.models.find(t.model)) throw openai::model_not_found(t.model);
            state.models.unload_when_idle(t.model);
            return send_json(res, ollama::load_json(api, t.model, /*unloading=*/true));
        }
        double load_seconds = 0;
        const std::shared_ptr<LoadedModel> model = lease(state, t.model, t.keep_alive, load_seconds);
        if (t.load_only) return send_json(res, ollama::load_json(api, t.model, false));
        openai::CompletionRequest creq;
        for (;;) {
            try {
                creq = openai::parse_completion_request(t.endpoint, t.body, model->context);
                break;
            } catch (const openai::ApiError& e) {
                // A chat past the context goes on without its oldest turns, as Ollama's does.
                if (e.code() != "context_length_exceeded" || !ollama::drop_oldest_turn(t)) throw;
            }
        }
        creq.params.n_predict = ollama::reply_tokens(t, model->context.n_ctx - static_cast<int32_t>(creq.prompt.size()));
        const Submitted s = submit_completion(state, model, creq, req.remote_addr);
        if (t.stream) return stream_reply(state, api, t, creq, s, arrived, load_seconds, res);
        if (!s.flight->await_all(*s.gen)) {
            res.status = 499;  // the client left
            return;
        }
        const std::vector<runtime::GenerateResult> results = s.gen->results();
        if (const runtime::GenerateResult* bad = failed(results)) throw result_error(*bad);
        const openai::Choice c = openai::make_choice(0, results[0], creq);
        send_json(res, ollama::done_json(api, t.model, results[0], {seconds_since(arrived), load_seconds}, c.text, c.tool_calls,
                                         t.show_thinking ? c.reasoning : std::string()));
    } catch (const openai::ApiError& e) {
        set_route_error(req.path, res, e);
    }
}

// /api/embed (`legacy` false) and /api/embeddings (true).
void handle_embed(ServerState& state, bool legacy, const httplib::Request& req, httplib::Response& res) {
    const auto arrived = Clock::now();
    try {
        const Json body = openai::parse_json_limited(req.body, "the request body", "invalid_json");
        const ollama::EmbedRequest e = legacy ? ollama::translate_embeddings(body) : ollama::translate_embed(body);
        double load_seconds = 0;
        const std::shared_ptr<LoadedModel> model = lease(state, e.model, e.keep_alive, load_seconds);
        if (e.load_only) {  // as Ollama answers a request that only loads the model
            if (legacy) return send_json(res, {{"embedding", Json::array()}});
            return send_json(res, ollama::embed_json(e.model, {}, {seconds_since(arrived), load_seconds}));
        }
        const openai::EmbeddingRequest ereq = openai::embedding_request(e.body, model->context);
        const auto results = run_embeddings(state, model, ereq, req.remote_addr);
        if (!results) {
            res.status = 499;
            return;
        }
        if (legacy) return send_json(res, {{"embedding", results->front().embedding}});
        send_json(res, ollama::embed_json(e.model, *results, {seconds_since(arrived), load_seconds}));
    } catch (const openai::ApiError& e) {
        set_route_error(req.path, res, e);
    }
}

void handle_show(ServerState& state, const httplib::Request& req, httplib::Response& res) {
    try {
        const Json body = openai::parse_json_limited(req.body, "the request body", "invalid_json");
        const std::string name = ollama::model_or_name(body);
        const models::LocalModel* m = state.models.find(name);
        if (!m || name.empty()) throw openai::model_not_found(name);
        send_json(res, ollama::show_json(*m, models::GgufFile::open(m->path, /*map_data=*/false), state.models.chat_template()));
    } catch (const openai::ApiError& e) {
        set_route_error(req.path, res, e);
    } catch (const Error& e) {
        set_route_error(req.path, res, openai::ApiError(500, e.what(), "server_error"));
    }
}

// /api/pull of a model served is done at once, as Ollama answers a model it has: scripts that
// make sure of a model before using it go on. Strata downloads nothing: another is a 404.
void handle_pull(ServerState& state, const httplib::Request& req, httplib::Response& res) {
    try {
        const Json body = openai::parse_json_limited(req.body, "the request body", "invalid_json");
        const std::string name = ollama::model_or_name(body);
        if (!state.models.find(name))
            throw openai::ApiError(404, fmt::format("the model '{}' does not exist, and this server downloads none: put its "
                                                    "GGUF file in the models folder; GET /v1/models lists the models this server has",
                                                    name),
                                   "invalid_request_error", "model", "model_not_found");
        const bool stream = !openai::field(body, "stream") || openai::boolean(body, "stream");
        res.set_content(openai::dump({{"status", "success"}}) + (stream ? "\n" : ""), stream ? "application/x-ndjson" : "application/json");
    } catch (const openai::ApiError& e) {
        set_route_error(req.path, res, e);
    }
}

// What Ollama's model store does: Strata serves the files of its models folder instead.
void refuse_model_store(const httplib::Request& req, httplib::Response& res) {
    set_route_error(req.path, res,
                    openai::ApiError(501, fmt::format("{} is not supported: this server serves the GGUF files of its models folder "
                                                      "and keeps no model store; add, copy or remove the files there", req.path),
                                     "invalid_request_error"));
}

void handle_ps(ServerState& state, httplib::Response& res) {
    Json list = Json::array();
    const auto now_steady = Clock::now();
    const auto now_wall = std::chrono::system_clock::now();
    for (const ModelRegistry::Loaded& l : state.models.loaded()) {
        std::optional<std::chrono::system_clock::time_point> expires;
        if (l.expires)
            expires = now_wall + std::chrono::duration_cast<std::chrono::system_clock::duration>(*l.expires - now_steady);
        list.push_back(ollama::running_json(l.model->info, l.model->memory_bytes(), l.model->engine->n_ctx(), expires));
    }
    send_json(res, {{"models", std::move(list)}});
}

}  // namespace

void add_ollama_routes(httplib::Server& http, ServerState& state) {
    http.Get("/api/version", [](const httplib::Request&, httplib::Response& res) { send_json(res, {{"version", kVersion}}); });
    http.Get("/api/tags", [&state](const httplib::Request&, httplib::Response& res) {
        send_json(res, ollama::tags_json(state.models.available()));
    });
    http.Get("/api/ps", [&state](const httplib::Request&, httplib::Response& res) { handle_ps(state, res); });
    post_route(http, "/api/show", [&state](const httplib::Request& req, httplib::Response& res) { handle_show(state, req, res); });
    post_route(http, "/api/chat", [&state](const httplib::Request& req, httplib::Response& res) { handle_generate(state, Api::Chat, req, res); });
    post_route(http, "/api/generate",
               [&state](const httplib::Request& req, httplib::Response& res) { handle_generate(state, Api::Generate, req, res); });
    post_route(http, "/api/embed", [&state](const httplib::Request& req, httplib::Response& res) { handle_embed(state, false, req, res); });
    post_route(http, "/api/embeddings",
               [&state](const httplib::Request& req, httplib::Response& res) { handle_embed(state, true, req, res); });
    post_route(http, "/api/pull", [&state](const httplib::Request& req, httplib::Response& res) { handle_pull(state, req, res); });
    for (const char* path : {"/api/create", "/api/copy", "/api/push"}) post_route(http, path, refuse_model_store);
    http.Delete("/api/delete", refuse_model_store);
}

}  // namespace strata::server
