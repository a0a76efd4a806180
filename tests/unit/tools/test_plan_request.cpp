// `POST /v1/plan` bodies read into the options of `strata plan`: each field lands where its
// flag would, a model is a catalog shape or a file the server lists (never a client's path),
// and every malformed field is a 400 naming it.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "tools/openai/api_error.h"
#include "tools/plan/plan_inputs.h"
#include "tools/plan/plan_request.h"

using namespace strata;
using namespace strata::cli;
using nlohmann::json;

namespace {

const LocalModels kLocal = {{"tiny.gguf", "/models/tiny.gguf"}};

openai::ApiError error_of(const std::string& body) {
    try {
        parse_plan_request(body, kLocal);
    } catch (const openai::ApiError& e) {
        return e;
    }
    FAIL("accepted: " << body);
    throw;
}

}  // namespace

TEST_CASE("plan request: every field lands where its flag would", "[unit][plan_request]") {
    const json body = {{"model", "llama3-70b"}, {"weight_type", "Q4_K"}, {"kv_type", "auto"}, {"gpu", "rtx4090"},
                       {"gpu_mem", "12G"},      {"pcie", "gen3"},         {"cpu", "epyc-9654"}, {"dram", "128G"},
                       {"dram_kind", "ddr5-4800"}, {"nvme", "gen5"},      {"nvme_bw", 3.5},    {"nvme_size", "4T"},
                       {"gpu_budget", "90%"},   {"dram_budget", "64G"},  {"nvme_budget", "1T"}, {"batch", 8},
                       {"prompt_len", 2048},    {"gen_len", 64},         {"objective", "throughput"},
                       {"no_cpu_attention", true}, {"no_recompute", true}};
    const PlanOptions o = parse_plan_request(body.dump(), kLocal).options;
    CHECK(o.shape == "llama3-70b");
    CHECK(o.model.empty());
    CHECK(o.weight_type == "Q4_K");
    CHECK(o.kv_type == "auto");
    CHECK(o.gpu == "rtx4090");
    CHECK(o.gpu_mem == "12G");
    CHECK(o.pcie == "gen3");
    CHECK(o.cpu == "epyc-9654");
    CHECK(o.dram == "128G");
    CHECK(o.dram_kind == "ddr5-4800");
    CHECK(o.nvme == "gen5");
    CHECK(o.nvme_bw == 3.5);
    CHECK(o.nvme_size == "4T");
    CHECK(o.gpu_budget == "90%");
    CHECK(o.dram_budget == "64G");
    CHECK(o.nvme_budget == "1T");
    CHECK(o.batch == 8);
    CHECK(o.prompt_len == 2048);
    CHECK(o.gen_len == 64);
    CHECK(o.objective == "throughput");
    CHECK(o.no_cpu_attention);
    CHECK(o.no_recompute);
    CHECK(o.hw.empty());  // never a profile file from a request
}

TEST_CASE("plan request: absent fields keep the command's defaults", "[unit][plan_request]") {
    const PlanOptions o = parse_plan_request(R"({"model": "llama3-8b", "gpu": "none"})", kLocal).options;
    const PlanOptions defaults;
    CHECK(o.kv_type == defaults.kv_type);
    CHECK(o.batch == defaults.batch);
    CHECK(o.prompt_len == defaults.prompt_len);
    CHECK(o.objective == defaults.objective);
    CHECK_FALSE(o.no_recompute);
}

TEST_CASE("plan request: a GGUF model is one the server lists, by name", "[unit][plan_request]") {
    const PlanOptions o = parse_plan_request(R"({"model": "tiny.gguf", "gpu": "none"})", kLocal).options;
    CHECK(o.model == "/models/tiny.gguf");
    CHECK(o.shape.empty());
    // Or by the id the server answers under, as every other endpoint names it.
    CHECK(parse_plan_request(R"({"model": "tiny", "gpu": "none"})", kLocal).options.model == "/models/tiny.gguf");
    for (const char* path : {"/models/tiny.gguf", "../tiny.gguf", "/etc/passwd"}) {
        const auto e = error_of(json({{"model", path}, {"gpu", "none"}}).dump());
        CHECK(e.status() == 400);
        CHECK(e.param() == "model");
    }
}

TEST_CASE("plan request: malformed bodies are 400s naming the field", "[unit][plan_request]") {
    const std::pair<std::string, std::string> cases[] = {
        {R"({"gpu": "none"})", "model"},
        {R"({"model": "llama3-8b"})", "gpu"},
        {R"({"model": "llama3-8b", "gpu": 4090})", "gpu"},
        {R"({"model": "llama3-8b", "gpu": "none", "batch": 0})", "batch"},
        {R"({"model": "llama3-8b", "gpu": "none", "batch": "8"})", "batch"},
        {R"({"model": "llama3-8b", "gpu": "none", "batch": 5000})", "batch"},
        {R"({"model": "llama3-8b", "gpu": "none", "prompt_len": 1.5})", "prompt_len"},
        {R"({"model": "llama3-8b", "gpu": "none", "nvme_bw": -1})", "nvme_bw"},
        {R"({"model": "llama3-8b", "gpu": "none", "no_recompute": "yes"})", "no_recompute"},
        {json({{"model", "llama3-8b"}, {"gpu", std::string(65, 'x')}}).dump(), "gpu"},
    };
    for (const auto& [body, param] : cases) {
        INFO(body);
        const auto e = error_of(body);
        CHECK(e.status() == 400);
        CHECK(e.param() == param);
    }
    // A request never names a profile file: "hw" says only "machine" (the --ui server's own).
    const auto file = error_of(R"({"model": "llama3-8b", "gpu": "none", "hw": "/etc/passwd"})");
    CHECK(file.param() == "hw");
    CHECK(std::string(file.what()).find("\"machine\"") != std::string::npos);
    CHECK(error_of(R"({"model": "llama3-8b", "gpu": "none", "output": "pdf"})").param() == "output");
    CHECK(error_of(R"({"model": "llama3-8b", "gpu": "none", "frontier": true})").param().empty());  // unknown field
    CHECK(error_of("[1, 2]").status() == 400);
    CHECK(error_of("{").status() == 400);
}

TEST_CASE("plan request: what to answer, the plan by default", "[unit][plan_request]") {
    CHECK(parse_plan_request(R"({"model": "llama3-8b", "gpu": "none"})", kLocal).output == PlanOutput::Plan);
    CHECK(parse_plan_request(R"({"model": "llama3-8b", "gpu": "none", "output": "plan"})", kLocal).output == PlanOutput::Plan);
    CHECK(parse_plan_request(R"({"model": "llama3-8b", "gpu": "none", "output": "frontier"})", kLocal).output == PlanOutput::Frontier);
    CHECK(parse_plan_request(R"({"model": "llama3-8b", "gpu": "none", "output": "svg"})", kLocal).output == PlanOutput::Svg);
}

TEST_CASE("plan request: \"hw\": \"machine\" plans for the server's own hardware, its parts replaced by those named", "[unit][plan_request]") {
    const PlanRequest r = parse_plan_request(R"({"model": "llama3-8b", "hw": "machine", "dram": "32G", "dram_budget": "50%"})", kLocal);
    CHECK(r.machine);
    CHECK(r.options.hw.empty());  // the server supplies it (strata plan --ui --hw FILE), never the request
    CHECK(r.options.dram == "32G");
    // 0 is no limit, as `strata plan --dram 0` and the engine's --dram 0 read it.
    CHECK(parse_plan_request(R"({"model": "llama3-8b", "gpu": "none", "dram": "0"})", kLocal).options.dram.empty());
    CHECK_FALSE(parse_plan_request(R"({"model": "llama3-8b", "gpu": "none"})", kLocal).machine);
    // Parts beside it replace its own, as `--machine this --gpu rtx4090`; "machine": "this" says the same.
    for (const char* asked : {R"({"model": "llama3-8b", "hw": "machine", "gpu": "rtx4090"})",
                              R"({"model": "llama3-8b", "machine": "this", "gpu": "rtx4090"})"}) {
        const PlanRequest with_gpu = parse_plan_request(asked, kLocal);
        CHECK(with_gpu.machine);
        CHECK(with_gpu.options.machine == strata::cli::kThisMachine);
        CHECK(with_gpu.options.gpu == "rtx4090");
    }
    // A catalog machine is every part of another machine.
    CHECK(error_of(R"({"model": "llama3-8b", "hw": "machine", "system": "flexgen-t4"})").param() == "hw");
}
