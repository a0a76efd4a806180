#include "tools/server/api_server.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/log.h"
#include "tools/openai/response.h"
#include "tools/server/auth.h"
#include "tools/server/metrics_stream.h"
#include "tools/server/cors.h"
#include "tools/server/peer_socket.h"
#include "tools/server/server_state.h"
#include "tools/server/web_routes.h"
#include "tools/terminal_text.h"

namespace strata::server {

// How long a connection may idle between requests.
constexpr int kKeepAliveS = 5;

void ServerState::track(runtime::Scheduler& s, uint64_t id) {
    std::lock_guard lock(mu_);
    in_flight_.insert({&s, id});
}

void ServerState::untrack(runtime::Scheduler& s, uint64_t id) {
    std::lock_guard lock(mu_);
    in_flight_.erase({&s, id});
}

size_t ServerState::in_flight() const {
    std::lock_guard lock(mu_);
    return in_flight_.size();
}

void ServerState::cancel_all() {
    std::lock_guard lock(mu_);
    for (const auto& [scheduler, id] : in_flight_) scheduler->cancel(id);
}

std::shared_ptr<LoadedModel> requested_model(ServerState& state, const openai::Json& body, std::optional<std::chrono::seconds> keep_alive) {
    const openai::Json* m = body.is_object() ? openai::field(body, "model") : nullptr;
    if (m && !m->is_string()) throw openai::invalid_request(fmt::format("'model' must be a string, not {}", openai::shown(*m)), "model");
    return state.models.acquire(m ? m->get<std::string>() : std::string(), keep_alive);
}

void post_route(httplib::Server& http, const std::string& pattern, std::function<void(const httplib::Request&, httplib::Response&)> handler) {
    http.Post(pattern, [handler = std::move(handler)](const httplib::Request& req, httplib::Response& res,
                                                      const httplib::ContentReader& read) {
        if (req.is_multipart_form_data()) {
            close_after_response();  // its body stays unread
            return set_route_error(req.path, res,
                                   openai::invalid_request("the request body must be JSON, not multipart/form-data", {}, "invalid_json"));
        }
        std::string body;
        if (!read([&](const char* data, size_t n) {
                body.append(data, n);
                return true;
            })) {
            close_after_response();
            res.status = 400;  // the error handler says why (408 when it was late)
            return;
        }
        // httplib built this request for this handler and hands it over as const: the body is
        // put where every handler reads it.
        const_cast<httplib::Request&>(req).body = std::move(body);
        handler(req, res);
    });
}

static LoopLimits loop_limits(const ServerConfig& c) {
    LoopLimits l;
    l.max_connections = c.max_connections;
    l.max_connections_per_client = c.max_connections_per_client;
    l.max_requests_per_client = c.max_requests_per_client;
    l.header_timeout = std::chrono::seconds(c.header_timeout_s);
    l.request_timeout = std::chrono::seconds(c.timeout_s);
    l.keep_alive = std::chrono::seconds(kKeepAliveS);
    l.max_body = c.max_body;
    l.workers = static_cast<size_t>(c.threads);
    return l;
}

namespace {
struct Route {
    const char* path;
    const char* method;
    const char* label = nullptr;  // a path that ends in a name: matched by prefix, labelled so in the metrics
};
}  // namespace

struct ApiServer::Impl {
    ServerConfig config;
    CorsPolicy cors;
    ServerState state;
    ConnectionServer http;
    ConnectionLoop loop;

    Impl(const ServerConfig& c, ModelRegistry& models)
        : config(c), cors(c.cors_origins, !c.api_key.empty()), state(models),
          loop(loop_limits(c), state.metrics, [this](ConnectionJob& job, bool last) { http.serve(job, last); }) {
        configure();
        routes();
    }

    static constexpr Route kRoutes[] = {
        {"/v1/chat/completions", "POST"}, {"/v1/completions", "POST"},   {"/v1/responses", "POST"},   {"/v1/embeddings", "POST"},  {"/v1/models", "GET"},
        {"/v1/models/", "GET", "/v1/models/{id}"},                       {"/tokenize", "POST"},       {"/detokenize", "POST"},
        {"/apply-template", "POST"},      {"/health", "GET"},            {"/metrics", "GET"},         {"/v1/metrics/stream", "GET"}, {"/v1/plan", "POST"},
        {"/v1/plan/options", "GET"},      {"/api/tags", "GET"},          {"/api/show", "POST"},       {"/api/ps", "GET"},
        {"/api/version", "GET"},          {"/api/chat", "POST"},         {"/api/generate", "POST"},   {"/api/embed", "POST"},
        {"/api/embeddings", "POST"},      {"/api/pull", "POST"},         {"/api/create", "POST"},     {"/api/copy", "POST"},
        {"/api/push", "POST"},            {"/api/delete", "DELETE"},     {"/", "GET"},                {"/plan", "GET"},
        {"/v1/messages", "POST"},         {"/v1/messages/count_tokens", "POST"}};
    // Every file of the page, under one name for the metrics.
    static constexpr Route kStaticRoute = {"/static/*", "GET"};

    static const Route* find_route(const std::string& path) {
        for (const Route& r : kRoutes)
            if (r.label ? path.size() > std::string_view(r.path).size() && path.starts_with(r.path) : path == r.path) return &r;
        if (path.starts_with("/static/") && is_web_path(path)) return &kStaticRoute;
        return nullptr;
    }

    // Paths a request may name, for the metrics' labels; anything else is "other".
    static std::string route_of(const std::string& path) {
        const Route* r = find_route(path);
        return !r ? "other" : r->label ? r->label : r->path;
    }

    // Everything but the health check, which load balancers and orchestrators probe without a key.
    // The web page's files hold no data: the page asks for the key and sends it with its requests.
    static bool needs_key(const std::string& path) { return path != "/health" && !is_web_path(path); }

    // What a route answers: its method (a GET's HEAD too) and OPTIONS.
    static std::string allowed_methods(const Route& r) {
        return fmt::format("{}{}, OPTIONS", r.method, std::string_view(r.method) == "GET" ? ", HEAD" : "");
    }

    static openai::ApiError origin_refused(const std::string& origin) {
        return openai::ApiError(403, fmt::format("this server does not take requests from pages at '{}'; start it with "
                                                 "--cors-origin {} to allow them", origin, origin),
                                "invalid_request_error", {}, "origin_not_allowed");
    }

    // Answers a CORS preflight: the route's method with the headers the API reads, or 403 naming
    // the flag that would allow the page's origin.
    httplib::Server::HandlerResponse preflight(const httplib::Request& req, httplib::Response& res, const Route* route) const {
        const std::string origin = req.get_header_value("Origin");
        if (!route) return refuse(req, res, openai::ApiError(404, fmt::format("unknown request URL: OPTIONS {}", req.path),
                                                            "invalid_request_error", {}, "unknown_url"));
        res.set_header("Allow", allowed_methods(*route));
        if (!req.has_header("Access-Control-Request-Method")) {
            res.status = 204;  // a plain OPTIONS: what the path takes
            return httplib::Server::HandlerResponse::Handled;
        }
        if (cors.allow_origin(origin).empty()) return refuse(req, res, origin_refused(origin));
        res.set_header("Access-Control-Allow-Methods", fmt::format("{}, OPTIONS", route->method));
        res.set_header("Access-Control-Allow-Headers", allowed_headers(req.get_header_value("Access-Control-Request-Headers")));
        res.set_header("Access-Control-Max-Age", std::to_string(kCorsMaxAgeS));
        res.status = 204;
        return httplib::Server::HandlerResponse::Handled;
    }

    // Methods for which httplib reads a body before routing.
    static bool reads_body(const std::string& method) {
        return method == "POST" || method == "PUT" || method == "PATCH" || method == "DELETE" || method == "PRI";
    }

    // A body announced by the headers (httplib reads one only for reads_body's methods: another
    // method's would be parsed as the next request on the connection).
    static bool announces_body(const httplib::Request& req) {
        const std::string length = req.get_header_value("Content-Length");
        return req.has_header("Transfer-Encoding") || (!length.empty() && length.find_first_not_of('0') != std::string::npos);
    }

    // Refusals decided from the headers alone, before httplib reads any body: the body stays
    // unread on the socket, so the connection cannot carry another request.
    static httplib::Server::HandlerResponse refuse(const httplib::Request& req, httplib::Response& res, const openai::ApiError& e) {
        set_route_error(req.path, res, e);
        if (reads_body(req.method) || announces_body(req)) {
            res.set_header("Connection", "close");
            close_after_response();
        }
        return httplib::Server::HandlerResponse::Handled;
    }

    httplib::Server::HandlerResponse check_headers(const httplib::Request& req, httplib::Response& res) const {
        using openai::ApiError;
        const std::string host = req.get_header_value("Host");
        if (!host_allowed(host, config.host, config.allowed_hosts))
            return refuse(req, res, ApiError(403, fmt::format("this server answers requests to localhost, not to '{}'; start it "
                                                              "with --allow-host {} if a proxy of yours passes that name on", host,
                                                              host),
                                             "invalid_request_error", {}, "host_not_allowed"));
        const Route* route = find_route(req.path);
        // Every answer to an allowed page carries its origin, refusals too, so that the page can read them.
        if (const std::string allowed = cors.allow_origin(req.get_header_value("Origin")); !allowed.empty()) {
            res.set_header("Access-Control-Allow-Origin", allowed);
            if (allowed != "*") res.set_header("Vary", "Origin");
        }
        if (req.method == "OPTIONS") return preflight(req, res, route);
        if (const std::string origin = req.get_header_value("Origin"); !origin_may_call(cors, origin, host))
            return refuse(req, res, origin_refused(origin));
        if (!route)
            return refuse(req, res, ApiError(404, fmt::format("unknown request URL: {} {}", req.method, req.path),
                                             "invalid_request_error", {}, "unknown_url"));
        if (req.method != route->method && !(req.method == "HEAD" && std::string_view(route->method) == "GET")) {
            res.set_header("Allow", allowed_methods(*route));
            return refuse(req, res, ApiError(405, fmt::format("{} takes {}, not {}", req.path, route->method, req.method),
                                             "invalid_request_error", {}, "method_not_allowed"));
        }
        if (!config.api_key.empty() && needs_key(req.path) && !key_matches(req.get_header_value("Authorization"), req.get_header_value("x-api-key"), config.api_key)) {
            res.set_header("WWW-Authenticate", "Bearer");
            return refuse(req, res, ApiError(401, "missing or incorrect API key: send 'Authorization: Bearer KEY'",
                                             "invalid_request_error", {}, "invalid_api_key"));
        }
        if (!reads_body(req.method) && announces_body(req))
            return refuse(req, res, ApiError(400, fmt::format("a {} request carries no body", req.method), "invalid_request_error",
                                             {}, "unexpected_body"));
        // httplib holds --max-body only against a Content-Length: a chunked body, or one that
        // lasts until the client closes, would be read into memory without limit.
        if (reads_body(req.method) && (req.has_header("Transfer-Encoding") || !req.has_header("Content-Length")))
            return refuse(req, res, ApiError(411, "send the request body with a Content-Length header (chunked bodies are not accepted)",
                                             "invalid_request_error", {}, "length_required"));
        return httplib::Server::HandlerResponse::Unhandled;
    }

    void configure() {
        http.set_payload_max_length(config.max_body);
        http.set_read_timeout(config.timeout_s, 0);
        http.set_write_timeout(config.timeout_s, 0);
        http.set_keep_alive_max_count(1000);
        http.set_keep_alive_timeout(kKeepAliveS);
        http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) { return check_headers(req, res); });
        // Errors httplib answers itself (body too large, malformed or late request) get OpenAI's shape too.
        http.set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
            if (!res.body.empty() || res.status == 499) return httplib::Server::HandlerResponse::Unhandled;
            close_after_response();  // where the next request would start on this connection is unknown
            const auto set_error = [&](const openai::ApiError& e) { set_route_error(req.path, res, e); };
            if (res.status == 413) {
                state.metrics.count_rejected("too_large");
                set_error(openai::ApiError(413, "the request body is larger than the server's --max-body",
                                           "invalid_request_error", {}, "request_too_large"));
            }
            else if (res.status == 400 && request_timed_out())
                set_error(openai::ApiError(408, fmt::format("the request did not arrive within {} s (--timeout)", config.timeout_s),
                                                "invalid_request_error", {}, "request_timeout"));
            else if (res.status == 414)
                set_error(openai::ApiError(414, "the request URL is too long", "invalid_request_error", {}, "uri_too_long"));
            else if (res.status == 400)
                set_error(openai::ApiError(400, "malformed HTTP request", "invalid_request_error", {}, "bad_http_request"));
            else
                set_error(openai::ApiError(res.status, fmt::format("HTTP {}", res.status), "invalid_request_error"));
            return httplib::Server::HandlerResponse::Handled;
        }));
        http.set_exception_handler([](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
            std::string what = "unknown error";
            try {
                std::rethrow_exception(ep);
            } catch (const std::exception& e) {
                what = e.what();
            } catch (...) {
            }
            STRATA_LOG_ERROR("serve: {}", what);
            set_route_error(req.path, res, openai::ApiError(500, "internal error: " + what, "server_error"));
        });
        // Never the prompt: method, path, status and the peer only; a request line that names no
        // method (a body's leftover bytes read as the next request) is not echoed, and the path
        // is shown, never obeyed, by a terminal.
        http.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
            state.metrics.count_response(route_of(req.path), res.status);
            static constexpr std::string_view kMethods[] = {"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"};
            const bool method = std::find(std::begin(kMethods), std::end(kMethods), req.method) != std::end(kMethods);
            constexpr size_t kShownPath = 200;
            STRATA_LOG_INFO("serve: {} {} {} from {}", method ? req.method : "(no method)",
                            method ? cli::terminal_safe(std::string_view(req.path).substr(0, kShownPath), true) : "",
                            res.status, req.remote_addr.empty() ? "(unknown)" : req.remote_addr);
        });
    }

    // The GGUF files the planner may name: the models served.
    cli::LocalModels served_files() const {
        cli::LocalModels files;
        for (const models::LocalModel& m : state.models.available()) files[m.path.filename().string()] = m.path.string();
        return files;
    }

    void routes() {
        post_route(http, "/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
            handle_completion(state, openai::Endpoint::Chat, req, res);
        });
        post_route(http, "/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
            handle_completion(state, openai::Endpoint::Completions, req, res);
        });
        post_route(http, "/v1/responses", [this](const httplib::Request& req, httplib::Response& res) { handle_responses(state, req, res); });
        post_route(http, "/v1/embeddings", [this](const httplib::Request& req, httplib::Response& res) { handle_embeddings(state, req, res); });
        post_route(http, "/tokenize", [this](const httplib::Request& req, httplib::Response& res) { handle_tokenize(state, req, res); });
        post_route(http, "/detokenize", [this](const httplib::Request& req, httplib::Response& res) { handle_detokenize(state, req, res); });
        post_route(http, "/apply-template", [this](const httplib::Request& req, httplib::Response& res) { handle_apply_template(state, req, res); });
        http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) { handle_models(state, res); });
        http.Get(R"(/v1/models/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
            handle_model(state, req.matches[1].str(), res);
        });
        http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
            const runtime::SchedulerStats s = state.models.stats();
            res.set_content(openai::dump({{"status", "ok"}, {"running", s.running}, {"queued", s.queued}}), "application/json");
        });
        http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
            const MemoryUse dram{state.models.memory_budget(), state.models.memory_used(), state.models.memory_peak()};
            res.set_content(state.metrics.render(state.models.stats(), dram), "text/plain; version=0.0.4");
        });
        http.Get("/v1/metrics/stream", [this](const httplib::Request&, httplib::Response& res) { handle_metrics_stream(state, res); });
        add_ollama_routes(http, state);
        add_anthropic_routes(http, state);
        post_route(http, "/v1/plan", [this](const httplib::Request& req, httplib::Response& res) { handle_plan(served_files(), PlanPage{}, req, res); });
        http.Get("/v1/plan/options", [this](const httplib::Request&, httplib::Response& res) {
            const auto served = state.models.default_if_loaded();
            handle_plan_options(served_files(), served ? served->context.placement : std::string(), PlanPage{}, res);
        });
        http.Get("/", [](const httplib::Request&, httplib::Response& res) { serve_web_file("/static/chat.html", res); });
        http.Get("/plan", [](const httplib::Request&, httplib::Response& res) { serve_web_file("/static/plan.html", res); });
        http.Get("/static/.*", [](const httplib::Request& req, httplib::Response& res) { serve_web_file(req.path, res); });
    }
};

ApiServer::ApiServer(const ServerConfig& config, ModelRegistry& models) : impl_(std::make_unique<Impl>(config, models)) {}

ApiServer::~ApiServer() = default;

void ApiServer::bind() { impl_->loop.bind(impl_->config.host, impl_->config.port); }

int ApiServer::port() const { return impl_->loop.port(); }

void ApiServer::run() { impl_->loop.run(); }

void ApiServer::stop_accepting() {
    impl_->state.stopping = true;  // ends the metrics streams, which would otherwise hold their connections
    impl_->loop.stop();
}

size_t ApiServer::in_flight() const { return impl_->state.in_flight(); }

void ApiServer::cancel_in_flight() { impl_->state.cancel_all(); }

}  // namespace strata::server
