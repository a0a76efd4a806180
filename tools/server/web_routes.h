#pragma once
// The web page: chat at `/`, the planner at `/plan`, their compiled-in files under /static/,
// and the planner's endpoints `POST /v1/plan` (the plan JSON of `strata plan --json`) and
// `GET /v1/plan/options` (what the page may choose from). Shared by `strata serve` and
// `strata plan --ui`.
#include <optional>
#include <string>

#include "tools/plan/plan_request.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace strata::server {

// The pages and their files hold no data, so they need no API key (the page asks for it).
bool is_web_path(const std::string& path);
// A page by its file ("/static/chat.html"), or a file by the request's path.
void serve_web_file(const std::string& file, httplib::Response& res);
// What `strata plan --ui` adds to the planner's endpoints (`strata serve` has neither): the
// flags it was started with, as request fields (the page's first choices), and the hardware
// profile a request may plan for with "hw": "machine" (--hw FILE; empty: this machine as probed).
struct PlanPage {
    std::string defaults;                   // a JSON object; empty: none
    std::optional<std::string> machine_hw;  // nullopt: catalog hardware only
};

// POST /v1/plan: the body's plan options -> the plan JSON (or its frontier, or its decode
// step as SVG); a 400 naming what is wrong.
void handle_plan(const cli::LocalModels& local, const PlanPage& page, const httplib::Request& req, httplib::Response& res);
// GET /v1/plan/options: catalog GPUs, CPUs, drives, DRAM kinds, systems and model shapes, the
// local GGUF files, the served model's plan (Plan::to_json; empty: no model, no chat page) and
// what `page` adds.
void handle_plan_options(const cli::LocalModels& local, const std::string& served_plan, const PlanPage& page,
                         httplib::Response& res);

}  // namespace strata::server
