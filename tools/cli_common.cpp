#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include <fmt/format.h>

#include "core/error.h"
#include "cpu/kv_format.h"
#include "planner/plan_report.h"
#include "runtime/place/placement.h"
#include "storage/budget.h"
#include "tools/cli_options.h"

namespace strata::cli {

runtime::EngineOptions ModelOptions::engine() const {
    runtime::EngineOptions e;
    e.model = model;
    e.n_threads = threads;
    e.n_ctx = ctx;
    e.prefetch_depth = prefetch;
    e.kv_spill_dir = kv_spill;
    if (!prefix_spill.empty()) e.prefix_spill_bytes = prefix_spill == "0" ? 0 : parse_memory_size(prefix_spill);
    e.trace_path = trace;
    e.int8_activations = int8_acts;
    e.bf16_prefill = bf16_prefill;
    e.tile_weights = !no_tile;
    const auto kv = dtype_from_name(kv_type);
    if (!kv || !cpu::is_kv_type(*kv))
        throw UsageError(fmt::format("--kv-type '{}' is not a KV cache type", kv_type), fmt::format("use one of {}", cpu::kKvTypeList));
    e.kv_type = *kv;
    if (gpu_mem.find('%') != std::string::npos)
        throw UsageError(fmt::format("--gpu-mem '{}' is a share; give the GPU memory as a size", gpu_mem), "e.g. --gpu-mem 20G");
    if (!gpu_mem.empty()) e.gpu.gpu_mem = gpu_mem == "0" ? 0 : parse_memory_size(gpu_mem);
    const auto where = runtime::parse_attention(attention);
    if (!where) throw UsageError(fmt::format("--attention '{}' is not a choice", attention), "use auto, cpu or gpu");
    e.gpu.attention = *where;
    const auto device = runtime::parse_device(this->device);
    if (!device) throw UsageError(fmt::format("--device '{}' is not a choice", this->device), "use auto, cpu, sim or cuda");
    e.gpu.device = *device;
    if (!(sim_link > 0)) throw UsageError(fmt::format("--sim-link {} must be above 0 GB/s", sim_link));
    e.gpu.sim_link_gbps = sim_link;
    e.gpu.sim_threads = sim_threads;
    std::string budget = dram;
    if (budget.empty())
        if (const char* env = std::getenv("STRATA_DRAM")) budget = env;
    if (!budget.empty()) e.dram_budget = parse_memory_size(budget);
    if (!plan_file.empty()) {
        std::ifstream in(plan_file, std::ios::binary);
        if (!in) throw IoError(fmt::format("cannot read the plan '{}'", plan_file), "make one with `strata plan -m MODEL -o FILE`");
        std::stringstream ss;
        ss << in.rdbuf();
        try {
            e.plan = planner::Plan::from_json(ss.str());
        } catch (const UsageError& err) {
            throw UsageError(fmt::format("--plan {}: {}", plan_file, err.what()), err.hint());
        }
    }
    if (show_plan)
        e.on_plan = [](const runtime::Placement& p) {
            fmt::print(stderr, "profile   {}\n{}\n", p.hw_source, planner::format_plan(p.plan, p.shape, p.hw, p.search));
        };
    return e;
}

std::string read_stdin() {
    std::stringstream ss;
    ss << std::cin.rdbuf();
    std::string s = ss.str();
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    return s;
}

}  // namespace strata::cli
