#include "tools/server/web_routes.h"

#include <httplib.h>

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "planner/catalog.h"
#include "planner/plan_report.h"
#include "planner/policy_search.h"
#include "tools/openai/api_error.h"
#include "tools/openai/json_fields.h"
#include "tools/plan/plan_hardware.h"
#include "tools/plan/plan_inputs.h"
#include "tools/server/web_assets.h"

namespace strata::server {

namespace {

// Replies are model output, so untrusted: even if the sanitiser missed something, the page
// runs only its own scripts and talks only to this server.
constexpr const char* kContentSecurityPolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

std::string content_type(std::string_view path) {
    if (path.ends_with(".html")) return "text/html; charset=utf-8";
    if (path.ends_with(".js")) return "text/javascript; charset=utf-8";
    if (path.ends_with(".css")) return "text/css; charset=utf-8";
    if (path.ends_with(".woff2")) return "font/woff2";
    return "application/octet-stream";
}

void send_error(httplib::Response& res, const openai::ApiError& e) {
    res.status = e.status();
    res.set_content(openai::dump(e.to_json()), "application/json");
}

}  // namespace

bool is_web_path(const std::string& path) {
    return path == "/" || path == "/plan" ||
           std::any_of(web_files().begin(), web_files().end(), [&](const WebFile& f) { return f.path == path; });
}

void serve_web_file(const std::string& file, httplib::Response& res) {
    const auto it = std::find_if(web_files().begin(), web_files().end(), [&](const WebFile& f) { return f.path == file; });
    if (it == web_files().end())
        return send_error(res, openai::ApiError(404, fmt::format("no page {}", file), "invalid_request_error", {}, "unknown_url"));
    res.set_header("Content-Security-Policy", kContentSecurityPolicy);
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_header("Referrer-Policy", "no-referrer");
    res.set_header("Cache-Control", "no-cache");
    res.set_content(std::string(it->body), content_type(it->path));
}

namespace {

// The policies no other beats per sequence and in aggregate, as `strata plan --frontier` lists them.
openai::Json frontier_json(const planner::SearchResult& r) {
    openai::Json rows = openai::Json::array();
    for (const planner::Plan& p : planner::frontier(r))
        rows.push_back({{"batch", p.policy.batch}, {"n_micro", p.policy.n_micro}, {"kv_type", dtype_name(p.policy.kv_type)},
                        {"cpu_attention", p.policy.cpu_attention}, {"recompute", p.policy.recompute}, {"ttft_s", p.prediction.ttft_s},
                        {"decode_tps_per_seq", p.prediction.decode_tps_per_seq}, {"throughput_tps", p.prediction.throughput_tps}});
    return rows;
}

}  // namespace

void handle_plan(const cli::LocalModels& local, const PlanPage& page, const httplib::Request& req, httplib::Response& res) {
    try {
        cli::PlanRequest r = cli::parse_plan_request(req.body, local);
        planner::HardwareProfile hw;
        if (r.machine) {
            if (!page.machine_hw)
                throw openai::invalid_request("this server plans for catalog hardware: name a 'gpu' or a 'system' "
                                              "('hw': \"machine\" is for `strata plan --ui`)", "hw");
            r.options.hw = *page.machine_hw;
            hw = cli::load_hardware(r.options);
        } else {
            hw = cli::catalog_hardware(r.options);
        }
        const cli::PlanRun run = cli::run_planner(r.options, std::move(hw));
        // Why the plan is the CPU alone's though a GPU was asked for, as `strata plan` says it.
        if (!run.gpu_left_out.empty()) res.set_header("X-Strata-Plan-Note", run.gpu_left_out);
        switch (r.output) {
            case cli::PlanOutput::Plan:  // as `strata plan --json` prints it
                res.set_content(run.result.best.to_json() + "\n", "application/json");
                break;
            case cli::PlanOutput::Frontier: res.set_content(openai::dump(frontier_json(run.result)), "application/json"); break;
            case cli::PlanOutput::Svg: res.set_content(planner::plan_svg(run.result.best, run.shape, run.hw), "image/svg+xml"); break;
        }
    } catch (const openai::ApiError& e) {
        send_error(res, e);
    } catch (const OutOfBudget& e) {
        send_error(res, openai::ApiError(422, e.hint().empty() ? e.what() : fmt::format("{} ({})", e.what(), e.hint()),
                                         "invalid_request_error", {}, "no_plan_fits"));
    } catch (const Error& e) {
        send_error(res, openai::invalid_request(e.hint().empty() ? e.what() : fmt::format("{} ({})", e.what(), e.hint())));
    }
}

void handle_plan_options(const cli::LocalModels& local, const std::string& served_plan, const PlanPage& page,
                         httplib::Response& res) {
    const planner::Catalog& c = planner::Catalog::builtin();
    openai::Json gpus = openai::Json::array(), cpus = openai::Json::array(), shapes = openai::Json::array();
    openai::Json nvme = openai::Json::array(), dram = openai::Json::array(), files = openai::Json::array();
    openai::Json systems = openai::Json::array();
    for (const auto& g : c.gpus) gpus.push_back({{"name", g.name}, {"memory_bytes", g.memory_bytes}, {"pcie", g.pcie}});
    for (const auto& p : c.cpus) cpus.push_back({{"name", p.name}, {"cores", p.cores}, {"dram", p.dram}, {"channels", p.channels}});
    for (const auto& m : c.models)
        shapes.push_back({{"name", m.name}, {"family", m.family}, {"n_layer", m.n_layer}, {"n_expert", m.n_expert},
                          {"n_expert_used", m.n_expert_used}});
    for (const auto& d : c.nvme) nvme.push_back({{"name", d.name}, {"read_gbps", d.read_gbps}, {"capacity_bytes", d.capacity_bytes}, {"example", d.example}});
    for (const auto& d : c.dram) dram.push_back(d.name);
    for (const auto& s : c.systems) systems.push_back({{"name", s.name}});
    for (const auto& [name, path] : local) files.push_back({{"name", name}, {"path", path}});
    openai::Json machine = nullptr;
    if (page.machine_hw)
        machine = {{"file", *page.machine_hw},
                   {"source", page.machine_hw->empty() ? "its probed profile" : fmt::format("the profile {}", *page.machine_hw)}};
    res.set_content(openai::dump({{"gpus", gpus}, {"cpus", cpus}, {"nvme", nvme}, {"dram_kinds", dram}, {"systems", systems},
                                  {"shapes", shapes}, {"local_models", files}, {"chat", !served_plan.empty()},
                                  {"served_plan", served_plan.empty() ? openai::Json() : openai::Json::parse(served_plan)},
                                  {"defaults", page.defaults.empty() ? openai::Json() : openai::Json::parse(page.defaults)},
                                  {"machine", machine}}),
                    "application/json");
}

}  // namespace strata::server
