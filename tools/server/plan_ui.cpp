#include "tools/server/plan_ui.h"

#include <httplib.h>

#include <cstdio>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/model_paths.h"
#include "planner/workload.h"
#include "tools/openai/api_error.h"
#include "tools/plan/plan_inputs.h"
#include "tools/server/web_routes.h"

namespace strata::server {

namespace {
constexpr size_t kMaxPlanBody = 64 << 10;  // a plan request is a few hundred bytes
constexpr int kTimeoutS = 30;

bool any_plan_flag(const cli::PlanOptions& o) {
    return !o.model.empty() || !o.shape.empty() || !o.hw.empty() || cli::names_catalog_parts(o) || !o.weight_type.empty() ||
           o.kv_type != "F16" || !o.gpu_mem.empty() || !o.dram.empty() || !o.nvme_size.empty() || o.nvme_bw > 0 ||
           !o.gpu_budget.empty() || !o.dram_budget.empty() || !o.nvme_budget.empty() || !o.workload.empty() || o.batch > 0 ||
           o.prompt_len > 0 || o.gen_len > 0 || !o.objective.empty() || o.no_cpu_attention || o.no_recompute || o.frontier;
}

// The flags as POST /v1/plan fields (the page's first choices); empty when none was given.
std::string page_defaults(const cli::PlanOptions& o) {
    if (!any_plan_flag(o)) return {};
    nlohmann::json d = nlohmann::json::object();
    const std::string model = !o.shape.empty() ? o.shape : !o.model.empty() ? o.model : resolve_model_path("").string();
    d["model"] = std::filesystem::exists(model) ? std::filesystem::path(model).filename().string() : model;
    if (!cli::names_catalog_parts(o) || o.machine == cli::kThisMachine) d["hw"] = "machine";
    const std::pair<const char*, const std::string*> texts[] = {
        {"weight_type", &o.weight_type}, {"machine", &o.machine}, {"gpu", &o.gpu}, {"gpu_mem", &o.gpu_mem}, {"pcie", &o.pcie},
        {"cpu", &o.cpu}, {"dram", &o.dram}, {"dram_kind", &o.dram_kind}, {"nvme", &o.nvme}, {"nvme_size", &o.nvme_size},
        {"gpu_budget", &o.gpu_budget}, {"dram_budget", &o.dram_budget}, {"nvme_budget", &o.nvme_budget}, {"objective", &o.objective}};
    for (const auto& [field, value] : texts)
        if (!value->empty()) d[field] = *value;
    if (o.kv_type != "F16") d["kv_type"] = o.kv_type;
    if (o.nvme_bw > 0) d["nvme_bw"] = o.nvme_bw;
    // --workload, with the flags that override it.
    planner::Workload wl;
    if (!o.workload.empty()) {
        wl.apply(o.workload);
        d["prompt_len"] = wl.prompt_len, d["gen_len"] = wl.gen_len, d["batch"] = wl.batch;
        d["objective"] = std::string(planner::objective_name(wl.objective));
    }
    if (o.prompt_len > 0) d["prompt_len"] = o.prompt_len;
    if (o.gen_len > 0) d["gen_len"] = o.gen_len;
    if (o.batch > 0) d["batch"] = o.batch;
    if (!o.objective.empty()) d["objective"] = o.objective;
    if (o.no_cpu_attention) d["no_cpu_attention"] = true;
    if (o.no_recompute) d["no_recompute"] = true;
    if (o.frontier) d["frontier"] = true;
    return d.dump();
}

}  // namespace

int run_plan_ui(const cli::PlanOptions& o) {
    // Read once: the GGUF files in the models directory (and the file given) when the page is served.
    cli::LocalModels local = cli::list_local_models();
    if (std::filesystem::exists(o.model)) local[std::filesystem::path(o.model).filename().string()] = o.model;
    const PlanPage page{page_defaults(o), o.hw};
    if (!page.defaults.empty()) {
        nlohmann::json request = nlohmann::json::parse(page.defaults);
        request.erase("frontier");  // the page's, not the plan's
        try {
            cli::parse_plan_request(request.dump(), local);  // a bad flag is said now, not on the page
        } catch (const openai::ApiError& e) {
            throw UsageError(fmt::format("--ui: {}", e.what()), "the page starts from these flags: fix or leave out the one named");
        }
    }
    httplib::Server http;
    http.set_payload_max_length(kMaxPlanBody);
    http.set_read_timeout(kTimeoutS, 0);
    http.set_write_timeout(kTimeoutS, 0);
    http.Get("/", [](const httplib::Request&, httplib::Response& res) { serve_web_file("/static/plan.html", res); });
    http.Get("/plan", [](const httplib::Request&, httplib::Response& res) { serve_web_file("/static/plan.html", res); });
    http.Get("/static/.*", [](const httplib::Request& req, httplib::Response& res) { serve_web_file(req.path, res); });
    http.Post("/v1/plan", [&](const httplib::Request& req, httplib::Response& res) { handle_plan(local, page, req, res); });
    http.Get("/v1/plan/options", [&](const httplib::Request&, httplib::Response& res) { handle_plan_options(local, {}, page, res); });
    const int bound = o.ui_port == 0 ? http.bind_to_any_port(o.ui_host) : (http.bind_to_port(o.ui_host, o.ui_port) ? o.ui_port : -1);
    if (bound <= 0)
        throw IoError(fmt::format("cannot listen on {}:{}", o.ui_host, o.ui_port), "the port may be in use: choose another with --port");
    fmt::print("strata: the planner page is at http://{}:{}/plan\n", o.ui_host.find(':') != std::string::npos ? "[" + o.ui_host + "]" : o.ui_host,
               bound);
    std::fflush(stdout);
    http.listen_after_bind();
    return 0;
}

}  // namespace strata::server
