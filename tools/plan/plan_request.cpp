#include "tools/plan/plan_request.h"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/model_paths.h"
#include "models/model_dir.h"
#include "planner/catalog.h"
#include "tools/openai/api_error.h"
#include "tools/openai/json_fields.h"
#include "tools/plan/plan_inputs.h"

namespace strata::cli {

using openai::invalid_request;
using openai::Json;

LocalModels list_local_models() {
    LocalModels out;
    try {
        for (const auto& f : models::gguf_files(models_dir())) out[f.filename().string()] = f.string();
    } catch (const UsageError&) {
        // no models folder yet: catalog shapes only
    }
    return out;
}

namespace {

// Names, sizes ("24G") and types: anything longer is not one of them.
constexpr size_t kMaxText = 64;

std::string text(const Json& body, const char* key) {
    std::string s = openai::string_field(body, key, {});
    if (s.size() > kMaxText) throw invalid_request(fmt::format("'{}' is longer than {} characters", key, kMaxText), key);
    return s;
}

int count(const Json& body, const char* key, int64_t hi) { return static_cast<int>(openai::integer_in(body, key, 1, hi, 0)); }

// Every field the request may carry; another is a typo the client should hear about.
constexpr const char* kFields[] = {"model", "weight_type", "kv_type", "machine", "system", "gpu", "gpu_mem", "pcie", "cpu", "dram",
                                   "dram_kind", "nvme", "nvme_bw", "nvme_size", "gpu_budget", "dram_budget", "nvme_budget",
                                   "batch", "prompt_len", "gen_len", "objective", "no_cpu_attention", "no_recompute",
                                   "hw", "output"};

PlanOutput output_of(const Json& body) {
    const std::string s = text(body, "output");
    if (s.empty() || s == "plan") return PlanOutput::Plan;
    if (s == "frontier") return PlanOutput::Frontier;
    if (s == "svg") return PlanOutput::Svg;
    throw invalid_request(fmt::format("'output' is {}; expected \"plan\", \"frontier\" or \"svg\"", openai::shown(Json(s))), "output");
}

}  // namespace

PlanRequest parse_plan_request(std::string_view body_text, const LocalModels& local) {
    const Json body = openai::parse_json_limited(body_text, "the plan request", "invalid_json");
    if (!body.is_object()) throw invalid_request("the plan request must be a JSON object");
    for (const auto& item : body.items())
        if (std::none_of(std::begin(kFields), std::end(kFields), [&](const char* f) { return item.key() == f; }))
            throw invalid_request(fmt::format("unknown field {} (fields: the flags of `strata plan`, e.g. gpu, dram, batch)",
                                              openai::shown(Json(item.key()))));
    PlanRequest request;
    PlanOptions& o = request.options;
    request.output = output_of(body);
    if (const std::string hw = text(body, "hw"); !hw.empty()) {
        if (hw != "machine")
            throw invalid_request(fmt::format("'hw' is {}; the one value is \"machine\" (the hardware `strata plan --ui` plans for)",
                                              openai::shown(Json(hw))), "hw");
        request.machine = true;
    }
    const std::string model = text(body, "model");
    if (model.empty()) throw invalid_request("'model' is required: a catalog shape or a GGUF file the server lists", "model");
    // A local model by its file name, or by the id the server answers under (the name without .gguf).
    auto it = local.find(model);
    if (it == local.end()) it = local.find(model + ".gguf");
    if (it != local.end())
        o.model = it->second;
    else if (planner::Catalog::builtin().find_model(model))
        o.shape = model;
    else
        throw invalid_request(fmt::format("model {} is neither a catalog shape nor a GGUF file this server lists", openai::shown(Json(model))),
                              "model", "model_not_found");
    o.gpu = text(body, "gpu");
    o.machine = text(body, "machine");
    if (o.machine.empty()) o.machine = text(body, "system");  // the field's old name, as the flag's
    if (o.machine == kThisMachine) request.machine = true;  // as `--machine this`: 'hw': "machine"
    if (o.gpu.empty() && o.machine.empty() && !request.machine)
        throw invalid_request("name the hardware: 'gpu' (a catalog GPU or \"none\"), 'machine' (a catalog system), or 'hw': "
                              "\"machine\" (this machine)",
                              "gpu");
    o.weight_type = text(body, "weight_type");
    if (const std::string kv = text(body, "kv_type"); !kv.empty()) o.kv_type = kv;
    o.gpu_mem = text(body, "gpu_mem"), o.pcie = text(body, "pcie"), o.cpu = text(body, "cpu");
    o.dram = text(body, "dram"), o.dram_kind = text(body, "dram_kind");
    if (is_zero_size(o.dram)) o.dram.clear();  // 0: no limit, as `strata plan --dram 0`
    o.nvme = text(body, "nvme"), o.nvme_size = text(body, "nvme_size");
    o.nvme_bw = openai::number_in(body, "nvme_bw", 0.01, 1000, 0);
    o.gpu_budget = text(body, "gpu_budget"), o.dram_budget = text(body, "dram_budget"), o.nvme_budget = text(body, "nvme_budget");
    o.batch = count(body, "batch", 4096);
    o.prompt_len = count(body, "prompt_len", 1 << 20);
    o.gen_len = count(body, "gen_len", 1 << 20);
    o.objective = text(body, "objective");
    o.no_cpu_attention = openai::boolean(body, "no_cpu_attention");
    o.no_recompute = openai::boolean(body, "no_recompute");
    // This machine with the parts named in place of its own (`--machine this`); not a catalog machine too.
    if (request.machine && !o.machine.empty() && o.machine != kThisMachine)
        throw invalid_request(fmt::format("'hw': \"machine\" is this machine, and 'machine' {} a catalog one: name one of them",
                                          openai::shown(Json(o.machine))),
                              "hw");
    if (request.machine) o.machine = kThisMachine;
    return request;
}

}  // namespace strata::cli
