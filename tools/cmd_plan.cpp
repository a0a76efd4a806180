// `strata plan`: a dry run of the planner. Builds the hardware profile (file, catalog parts or
// this machine), the model shape (GGUF header or catalog) and the workload, searches the
// policies, and prints the chosen placement with its predicted speed, or the plan as JSON.
#include <filesystem>
#include <fstream>
#include <iostream>

#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"
#include "core/model_paths.h"
#include "planner/catalog.h"
#include "planner/expert_placement.h"
#include "planner/plan_report.h"
#include "planner/policy_search.h"
#include "planner/units.h"
#include "probe/probe.h"
#include "tools/cli_options.h"

namespace strata::cli {

using namespace strata::planner;

namespace {

ModelShape load_shape(const PlanOptions& o, DType kv) {
    const std::string name = !o.shape.empty() ? o.shape : o.model;
    const bool is_file = o.shape.empty() && (name.empty() || std::filesystem::exists(name));
    if (is_file) {
        if (!o.weight_type.empty())
            throw UsageError("--weight-type applies to catalog shapes; a GGUF file has its own types");
        ModelShape s = ModelShape::from_gguf(resolve_model_path(name));
        s.kv_type = kv;
        return s;
    }
    if (!Catalog::builtin().find_model(name))
        throw UsageError(fmt::format("'{}' is neither a file nor a catalog model shape", name),
                         fmt::format("catalog shapes: {}", Catalog::builtin().model_names()));
    DType wt = DType::F16;
    if (!o.weight_type.empty()) {
        const auto t = dtype_from_name(o.weight_type);
        if (!t) throw UsageError(fmt::format("--weight-type '{}' is not a GGUF type", o.weight_type));
        wt = *t;
    }
    return ModelShape::from_catalog(name, wt, kv);
}

std::vector<DType> kv_types(const std::string& s) {
    if (s == "auto") return {DType::F16, DType::Q8_0, DType::Q4_0};
    const auto t = dtype_from_name(s);
    if (!t || !(*t == DType::F16 || *t == DType::F32 || *t == DType::BF16 || *t == DType::Q8_0 || *t == DType::Q4_0))
        throw UsageError(fmt::format("--kv-type '{}' is not supported", s), "use F16, BF16, F32, Q8_0, Q4_0 or auto");
    return {*t};
}

// An installed capacity (--dram, --gpu-mem, --nvme-size) is a size: a share of it would be circular.
uint64_t capacity(const std::string& text, const char* flag) {
    if (text.find('%') != std::string::npos)
        throw UsageError(fmt::format("{} '{}' is a share, but a capacity must be a size", flag, text), "write e.g. 64G");
    return parse_size(text, flag, 0);
}

HardwareProfile load_hardware(const PlanOptions& o) {
    const bool dry_run = !o.system.empty() || !o.gpu.empty() || !o.cpu.empty() || !o.pcie.empty() || !o.nvme.empty() ||
                         !o.dram_kind.empty();
    if (!o.hw.empty() && dry_run) throw UsageError("--hw and catalog parts (--gpu, --system, ...) cannot be combined");
    HardwareProfile hw;
    if (!o.hw.empty()) {
        hw = probe::load_profile(o.hw);
    } else if (dry_run) {
        DryRunSpec spec;
        spec.system = o.system, spec.gpu = o.gpu, spec.pcie = o.pcie, spec.cpu = o.cpu, spec.dram_kind = o.dram_kind, spec.nvme = o.nvme;
        if (!o.gpu_mem.empty()) spec.gpu_memory = capacity(o.gpu_mem, "--gpu-mem");
        if (!o.dram.empty()) spec.dram = capacity(o.dram, "--dram");
        if (!o.nvme_size.empty()) spec.nvme_capacity = capacity(o.nvme_size, "--nvme-size");
        if (o.nvme_bw > 0) spec.nvme_read_gbps = o.nvme_bw;
        return profile_from_catalog(spec);
    } else {
        std::string source;
        hw = probe::measured_profile(source, models_dir());
        STRATA_LOG_INFO("planner: hardware profile from {}", source);
    }
    // Capacities given on the command line override the profile's.
    if (!o.gpu_mem.empty()) {
        if (!hw.gpu) throw UsageError("--gpu-mem given but the profile has no GPU", "name one with --gpu");
        hw.gpu->memory_bytes = capacity(o.gpu_mem, "--gpu-mem");
    }
    if (!o.dram.empty()) hw.dram.capacity_bytes = capacity(o.dram, "--dram");
    if (!o.nvme_size.empty()) hw.nvme.capacity_bytes = capacity(o.nvme_size, "--nvme-size");
    if (o.nvme_bw > 0) hw.nvme.write_gbps *= o.nvme_bw / hw.nvme.read_gbps, hw.nvme.read_gbps = o.nvme_bw;
    return hw;
}

Workload load_workload(const PlanOptions& o) {
    Workload wl;
    if (!o.workload.empty()) wl.apply(o.workload);
    if (o.batch > 0) wl.batch = o.batch;
    if (o.prompt_len > 0) wl.prompt_len = o.prompt_len;
    if (o.gen_len > 0) wl.gen_len = o.gen_len;
    if (!o.objective.empty()) {
        const auto obj = objective_from_name(o.objective);
        if (!obj) throw UsageError(fmt::format("--objective '{}' must be latency or throughput", o.objective));
        wl.objective = *obj;
    }
    wl.validate();
    return wl;
}

void write_file(const std::string& path, const std::string& text, const char* what) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out) throw IoError(fmt::format("cannot write the {} to '{}'", what, path));
}

}  // namespace

int run_plan(const PlanOptions& o) {
    PlannerOptions opts;
    opts.kv_types = kv_types(o.kv_type);
    opts.allow_cpu_attention = !o.no_cpu_attention;
    opts.allow_recompute = !o.no_recompute;
    const ModelShape shape = load_shape(o, opts.kv_types.front());
    const HardwareProfile hw = load_hardware(o);
    const Workload wl = load_workload(o);
    opts.budgets = default_budgets(hw);
    if (!o.gpu_budget.empty()) opts.budgets.gpu = static_cast<double>(parse_size(o.gpu_budget, "--gpu-budget", hw.gpu ? hw.gpu->memory_bytes : 0));
    if (!o.dram_budget.empty()) opts.budgets.dram = static_cast<double>(parse_size(o.dram_budget, "--dram-budget", hw.dram.capacity_bytes));
    if (!o.nvme_budget.empty()) opts.budgets.nvme = static_cast<double>(parse_size(o.nvme_budget, "--nvme-budget", hw.nvme.capacity_bytes));

    // A mixture of experts may do better with its routed experts offloaded (planner/expert_placement.h).
    const SearchResult r = search_with_expert_offload(shape, hw, wl, opts);
    const std::string json = r.best.to_json();
    if (!o.out.empty()) write_file(o.out, json + "\n", "plan");
    if (!o.svg.empty()) write_file(o.svg, plan_svg(r.best, shape, hw), "timeline SVG");
    if (o.json) {
        std::cout << json << "\n";
        return 0;
    }
    std::cout << format_plan(r.best, shape, hw, {r.n_policies, r.seconds});
    if (o.frontier) {
        fmt::print("\nfrontier (no other policy is faster per sequence and in aggregate):\n");
        fmt::print("{:>6} {:>6} {:>5} {:>9} {:>5} {:>10} {:>14} {:>12}\n", "batch", "micro", "KV", "cpu attn", "rc", "TTFT",
                   "tok/s per seq", "tok/s total");
        for (const Plan& p : frontier(r))
            fmt::print("{:>6} {:>6} {:>5} {:>9} {:>5} {:>10} {:>14.3g} {:>12.3g}\n", p.policy.batch, p.policy.n_micro,
                       dtype_name(p.policy.kv_type), p.policy.cpu_attention ? "on" : "off", p.policy.recompute ? "on" : "off",
                       format_seconds(p.prediction.ttft_s), p.prediction.decode_tps_per_seq, p.prediction.throughput_tps);
    }
    return 0;
}

}  // namespace strata::cli
