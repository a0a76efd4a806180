#include "tools/server/plan_ui.h"

#include <httplib.h>

#include <cstdio>

#include <fmt/format.h>

#include "core/error.h"
#include "tools/server/web_routes.h"

namespace strata::server {

namespace {
constexpr size_t kMaxPlanBody = 64 << 10;  // a plan request is a few hundred bytes
constexpr int kTimeoutS = 30;
}  // namespace

int run_plan_ui(const std::string& host, int port) {
    // Read once: the GGUF files in the models directory when the page is served.
    const cli::LocalModels local = cli::list_local_models();
    httplib::Server http;
    http.set_payload_max_length(kMaxPlanBody);
    http.set_read_timeout(kTimeoutS, 0);
    http.set_write_timeout(kTimeoutS, 0);
    http.Get("/", [](const httplib::Request&, httplib::Response& res) { serve_web_file("/static/plan.html", res); });
    http.Get("/plan", [](const httplib::Request&, httplib::Response& res) { serve_web_file("/static/plan.html", res); });
    http.Get("/static/.*", [](const httplib::Request& req, httplib::Response& res) { serve_web_file(req.path, res); });
    http.Post("/v1/plan", [&](const httplib::Request& req, httplib::Response& res) { handle_plan(local, req, res); });
    http.Get("/v1/plan/options", [&](const httplib::Request&, httplib::Response& res) { handle_plan_options(local, {}, res); });
    const int bound = port == 0 ? http.bind_to_any_port(host) : (http.bind_to_port(host, port) ? port : -1);
    if (bound <= 0)
        throw IoError(fmt::format("cannot listen on {}:{}", host, port), "the port may be in use: choose another with --port");
    fmt::print("strata: the planner page is at http://{}:{}/plan\n", host.find(':') != std::string::npos ? "[" + host + "]" : host, bound);
    std::fflush(stdout);
    http.listen_after_bind();
    return 0;
}

}  // namespace strata::server
