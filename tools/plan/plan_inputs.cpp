#include "tools/plan/plan_inputs.h"

#include <filesystem>
#include <functional>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "core/bytes.h"
#include "core/error.h"
#include "core/model_paths.h"
#include "planner/catalog.h"
#include "planner/expert_placement.h"
#include "planner/units.h"
#include "models/gguf_file.h"
#include "runtime/host_memory.h"
#include "runtime/place/model_file_rate.h"
#include "runtime/spec/speculation.h"

namespace strata::cli {

using namespace strata::planner;

namespace {
// The GGUF file planned for; empty for a catalog shape.
std::filesystem::path plan_model_file(const PlanOptions& o) {
    const std::string name = !o.shape.empty() ? o.shape : o.model;
    const bool is_file = o.shape.empty() && (name.empty() || std::filesystem::exists(name));
    return is_file ? resolve_model_path(name) : std::filesystem::path{};
}
}  // namespace

ModelShape plan_shape(const PlanOptions& o, DType kv) {
    if (!o.shape.empty() && !o.model.empty())
        throw UsageError(fmt::format("-m {} and --shape {} both name the model", o.model, o.shape),
                         "give -m for a GGUF file or --shape for a catalog shape, not both");
    const std::string name = !o.shape.empty() ? o.shape : o.model;
    if (const auto file = plan_model_file(o); !file.empty()) {
        if (!o.weight_type.empty())
            throw UsageError("--weight-type applies to catalog shapes; a GGUF file has its own types");
        ModelShape s = ModelShape::from_gguf(file);
        s.kv_type = kv;
        return s;
    }
    if (!Catalog::builtin().find_model(name))
        throw UsageError(fmt::format("'{}' is neither a file nor a catalog model shape", name),
                         fmt::format("catalog shapes: {}", Catalog::builtin().model_names()));
    return ModelShape::from_catalog(name, o.weight_type, kv);
}

namespace {

// A budget given as SIZE or a share of `capacity`, refused above it: a plan for memory the
// machine does not have could not run.
double budget_within(const std::string& text, const char* flag, uint64_t capacity, const std::string& what,
                     const char* larger) {
    const uint64_t b = parse_size(text, flag, capacity);
    if (b > capacity)
        throw UsageError(fmt::format("{} {} is more than {} ({})", flag, format_size(static_cast<double>(b)), what,
                                     format_size(static_cast<double>(capacity))),
                         fmt::format("give at most that, or {}", larger));
    return static_cast<double>(b);
}

std::vector<DType> kv_types(const std::string& s) {
    if (s == "auto") return {DType::F16, DType::Q8_0, DType::Q4_0};
    const auto t = dtype_from_name(s);
    if (!t || !(*t == DType::F16 || *t == DType::F32 || *t == DType::BF16 || *t == DType::Q8_0 || *t == DType::Q4_0))
        throw UsageError(fmt::format("--kv-type '{}' is not supported", s), "use F16, BF16, F32, Q8_0, Q4_0 or auto");
    return {*t};
}

// The run a plan for `wl` is checked for, as the engine's commands run it by default
// (--prefetch 2, --spec auto with drafts of --spec-depth).
runtime::HostRun host_run(const Plan& plan, const Workload& wl) {
    runtime::HostRun run;
    run.n_ctx = wl.kv_positions();
    run.n_batch = std::max(1, plan.policy.batch);
    run.kv_type = plan.policy.kv_type;
    run.decode_rows = 1 + runtime::SpecOptions{}.max_depth;
    return run;
}

// A plan for a model file that runs at the DRAM budget it is made for: the runtime counts its
// working memory, rings, KV spill buffers and a device backend's host buffers its own way
// (runtime/host_memory.h), more than the cost model estimates in some places and less in others,
// so the planner's own budget is a knob, not the limit. The plan made for `budget` itself where
// the runtime holds it within `budget`; else the one made for the most the planner may be given
// whose plan the runtime holds, found by bisection up to `most` (what a plan needs rises with the
// planner's budget in steps: streaming a layer adds a ring slot until the ring is full). `search` runs the planner for a DRAM budget. Throws OutOfBudget where none fits.
SearchResult fit_runtime_dram(const std::filesystem::path& file, const Workload& wl, double budget, double most,
                              const std::function<SearchResult(double)>& search, double* least_need = nullptr) {
    const auto gguf = models::GgufFile::open(file);
    struct Fit {
        SearchResult plan;
        double need = 0;
    };
    // The planner's plan for a budget of `dram` and what the runtime needs to run it; none where
    // the planner holds nothing in that little.
    const auto plan_for = [&](double dram) -> std::optional<Fit> {
        try {
            Fit f{search(dram)};
            f.need = static_cast<double>(runtime::least_dram_for_plan(gguf, f.plan.best, host_run(f.plan.best, wl)));
            if (least_need) *least_need = *least_need > 0 ? std::min(*least_need, f.need) : f.need;
            return f;
        } catch (const OutOfBudget&) {
            return std::nullopt;
        }
    };
    std::optional<Fit> fitting = plan_for(budget);
    if (!fitting || fitting->need > budget) {
        fitting.reset();
        double lo = 0, hi = most;
        while (hi - lo > std::max(64.0 * 1024, budget / 4096)) {
            const double mid = (lo + hi) / 2;
            std::optional<Fit> at = plan_for(mid);
            if (at && at->need > budget) {
                hi = mid;
            } else {
                lo = mid;  // it fits, or the planner's own floor is above mid
                if (at) fitting = std::move(at);
            }
        }
    }
    if (!fitting)
        throw OutOfBudget(fmt::format("the DRAM budget {} holds no plan as the runtime runs it (its working memory, "
                                      "streaming ring and KV spill buffers beside what the planner places)",
                                      format_size(budget)));
    // Shown as the runtime counts it: the budget given, and what running the plan takes.
    fitting->plan.best.budgets.dram = budget;
    fitting->plan.best.prediction.used.dram = std::max(fitting->need, fitting->plan.best.prediction.used.dram);
    return std::move(fitting->plan);
}

// The device plan searched again with its decode step bounded (`search` searches with the
// bound), as the runtime holds it under a DRAM budget for a model file; none where nothing fits.
std::optional<SearchResult> search_decoding_no_slower(const std::filesystem::path& fitted_file, const Workload& wl, double dram,
                                                      const ModelShape& shape, const std::function<SearchResult(double)>& search) {
    try {
        if (fitted_file.empty()) return search(dram);
        return fit_runtime_dram(fitted_file, wl, dram, dram + 2 * shape.total_weight_bytes(), search);
    } catch (const OutOfBudget&) {
        return std::nullopt;
    }
}

}  // namespace

Workload plan_workload(const PlanOptions& o) {
    Workload wl;
    if (!o.workload.empty()) wl.apply(o.workload);
    if (o.batch > 0) wl.batch = o.batch;
    if (o.prompt_len > 0) wl.prompt_len = o.prompt_len;
    if (o.gen_len > 0) wl.gen_len = o.gen_len;
    if (!o.objective.empty()) {
        const auto obj = objective_from_name(o.objective);
        if (!obj) throw UsageError(fmt::format("--objective '{}' is not a choice", o.objective), "use latency or throughput");
        wl.objective = *obj;
    }
    wl.validate();
    return wl;
}

DType plan_kv_type(const PlanOptions& o) { return kv_types(o.kv_type).front(); }

bool is_zero_size(const std::string& text) {
    try {
        return !text.empty() && parse_memory_size(text) == 0;
    } catch (const UsageError&) {
        return false;
    }
}

// An installed capacity (--dram, --gpu-mem, --nvme-size) is a size: a share of it would be circular.
uint64_t capacity(const std::string& text, const char* flag) {
    if (text.find('%') != std::string::npos)
        throw UsageError(fmt::format("{} '{}' is a share, but a capacity must be a size", flag, text), "write e.g. 64G");
    return parse_size(text, flag, 0);
}

bool names_catalog_parts(const PlanOptions& o) {
    return (!o.machine.empty() && o.machine != kThisMachine) || !o.gpu.empty() || !o.cpu.empty() || !o.pcie.empty() ||
           !o.nvme.empty() || !o.dram_kind.empty();
}

std::filesystem::path local_model_file(const PlanOptions& o) {
    return names_catalog_parts(o) || !o.hw.empty() ? std::filesystem::path{} : plan_model_file(o);
}

DryRunSpec catalog_parts(const PlanOptions& o) {
    if (!o.gpu_mem.empty() && o.gpu == "none")
        throw UsageError("--gpu-mem sizes a GPU, and --gpu none plans without one", "leave one of them out");
    DryRunSpec spec;
    spec.system = o.machine == kThisMachine ? "" : o.machine, spec.gpu = o.gpu, spec.pcie = o.pcie, spec.cpu = o.cpu, spec.dram_kind = o.dram_kind, spec.nvme = o.nvme;
    if (!o.gpu_mem.empty()) spec.gpu_memory = capacity(o.gpu_mem, "--gpu-mem");
    if (!o.dram.empty()) spec.dram = capacity(o.dram, "--dram");
    if (!o.nvme_size.empty()) spec.nvme_capacity = capacity(o.nvme_size, "--nvme-size");
    if (o.nvme_bw > 0) spec.nvme_read_gbps = o.nvme_bw;
    return spec;
}

HardwareProfile catalog_hardware(const PlanOptions& o) {
    STRATA_ASSERT(o.machine != kThisMachine && "this machine's profile is load_hardware's");
    return profile_from_catalog(catalog_parts(o));
}

namespace {

PlanRun plan_placement(const PlanOptions& o, HardwareProfile hardware) {
    PlannerOptions opts;
    opts.kv_types = kv_types(o.kv_type);
    opts.allow_cpu_attention = !o.no_cpu_attention;
    opts.allow_recompute = !o.no_recompute;
    opts.limits.op_offload = true;     // the device runtime's, for a long prompt
    opts.limits.head_on_device = true;     // the device runtime's head, in the GPU budget here,
    opts.limits.embedding_on_host = true;  // and its embeddings, looked up in DRAM
    // A model file: the runtime holds its output layer and embeddings in DRAM.
    const std::filesystem::path model_file = plan_model_file(o);
    opts.limits.head_off_nvme = !model_file.empty();
    PlanRun run{plan_shape(o, opts.kv_types.front()), std::move(hardware), {}};
    const HardwareProfile& hw = run.hw;
    const Workload wl = plan_workload(o);
    opts.budgets = default_budgets(hw);
    // --dram is what the run may hold in DRAM, as the runtime's --dram is: all of it is the budget.
    if (!o.dram.empty()) opts.budgets.dram = static_cast<double>(hw.dram.capacity_bytes);
    if (!o.gpu_budget.empty()) {
        if (!hw.gpu) throw UsageError("--gpu-budget is given but the machine planned for has no GPU",
                                      "name one with --gpu (e.g. --gpu rtx4090), or leave --gpu-budget out");
        opts.budgets.gpu = budget_within(o.gpu_budget, "--gpu-budget", hw.gpu->memory_bytes, hw.gpu->name + "'s memory",
                                         "--gpu-mem SIZE to plan for a card with more");
        if (opts.budgets.gpu <= 0) run.hw.gpu.reset();  // none of the card: the CPU alone, as the runtime's --gpu-mem 0
    }
    if (!o.dram_budget.empty())
        opts.budgets.dram = budget_within(o.dram_budget, "--dram-budget", hw.dram.capacity_bytes, "the machine's DRAM",
                                          "--dram SIZE to plan for a machine with more");
    if (!o.nvme_budget.empty())
        opts.budgets.nvme = budget_within(o.nvme_budget, "--nvme-budget", hw.nvme.capacity_bytes, "the disk's free space",
                                          "--nvme-size SIZE to plan for a larger drive");

    // This machine's own model file that the DRAM budget cannot hold is read at its own rate, as
    // the runtime times it (runtime/place/model_file_rate.h).
    if (const auto file = local_model_file(o); !file.empty() && run.shape.total_weight_bytes() > opts.budgets.dram)
        runtime::measure_model_file_reads(run.hw.nvme, file);
    // The CPU alone, the GPU left out (as the runtime's --gpu-mem 0 runs it).
    const auto search_cpu_alone = [&](PlannerOptions cpu_opts) {
        HardwareProfile alone = hw;
        alone.gpu.reset();
        cpu_opts.budgets.gpu = 0;
        return search_with_expert_offload(run.shape, alone, wl, cpu_opts);
    };
    const auto cpu_alone = [&] { return search_cpu_alone(opts); };
    // A model file under a DRAM budget is planned as the runtime holds it (on this machine or another).
    const std::filesystem::path fitted_file = (!o.dram.empty() || !o.dram_budget.empty()) ? model_file : std::filesystem::path{};
    const auto fit_cpu_alone = [&] {
        return fit_runtime_dram(fitted_file, wl, opts.budgets.dram, opts.budgets.dram + 2 * run.shape.total_weight_bytes(),
                                [&](double dram) {
                                    PlannerOptions fitted = opts;
                                    fitted.budgets.dram = dram;
                                    // The CPU runtime keeps a recomputed layer's hidden states in DRAM
                                    // wherever the plan puts them: such plans save it nothing here.
                                    fitted.allow_recompute = false;
                                    return search_cpu_alone(fitted);
                                });
    };
    const auto cpu_alone_as_run = [&] { return fitted_file.empty() ? cpu_alone() : fit_cpu_alone(); };
    if (!hw.gpu && !fitted_file.empty()) {
        run.result = fit_cpu_alone();
        return run;
    }
    // A mixture of experts may do better with its routed experts offloaded (planner/expert_placement.h).
    // `max_decode_step_s`: bounded where the best device plan trades decode for prefill (0: not).
    const auto search_device_within = [&](double dram, double max_decode_step_s) {
        PlannerOptions d = opts;
        d.budgets.dram = dram;
        d.max_decode_step_s = max_decode_step_s;
        return search_with_expert_offload(run.shape, hw, wl, d);
    };
    const auto search_device = [&](double dram) { return search_device_within(dram, 0); };
    try {
        run.result = search_device(opts.budgets.dram);
    } catch (const OutOfBudget& e) {
        if (!hw.gpu) throw;
        try {
            cpu_alone_as_run();
        } catch (const OutOfBudget&) {
            throw e;
        }
        throw GpuBudgetTooSmall(e.what(), "the CPU alone holds the workload: plan it with --gpu-budget 0 (the runtime's "
                                          "--gpu-mem 0), or give the GPU more memory");
    }
    // A dense model's device plan beside the device backend's host buffers (a mixture of experts
    // on a device is placed by the runtime itself); where none fits, the CPU alone's, as the
    // runtime falls back to it.
    if (run.result.best.has_gpu && !fitted_file.empty() && run.shape.n_expert == 0) {
        double least = 0;  // the least any device plan tried needs
        try {
            run.result = fit_runtime_dram(fitted_file, wl, opts.budgets.dram, opts.budgets.dram + 2 * run.shape.total_weight_bytes(),
                                          search_device, &least);
        } catch (const OutOfBudget&) {
            run.result = fit_cpu_alone();
            // Named only where a plan made for it runs there (a larger budget may not plan the device at all).
            std::string from;
            if (least > opts.budgets.dram) {
                try {
                    fit_runtime_dram(fitted_file, wl, least, least + 2 * run.shape.total_weight_bytes(), search_device);
                    from = fmt::format(" (a plan with the GPU runs from {})", format_bytes_at_least(static_cast<uint64_t>(least)));
                } catch (const OutOfBudget&) {
                    // none does there: no figure to name
                }
            }
            run.gpu_left_out = fmt::format("no plan with the GPU runs in {} of DRAM beside the device backend's host buffers{}; "
                                           "it runs on the CPU alone (the runtime's --gpu-mem 0)",
                                           format_size(opts.budgets.dram), from);
            return run;
        }
    }
    if (!run.result.best.has_gpu) {
        if (!fitted_file.empty()) run.result = fit_cpu_alone();
        return run;
    }
    // A device placement only where it beats the CPU alone.
    try {
        SearchResult cpu = cpu_alone_as_run();
        run.cpu_alone = cpu.best.prediction;
        if (!device_beats_cpu(run.result.best.prediction, cpu.best.prediction)) {
            std::optional<SearchResult> bounded;
            if (trades_decode_for_prefill(run.result.best.prediction, cpu.best.prediction)) {
                const double cpu_step_s = cpu.best.prediction.decode.time_s;
                // (A mixture's device plan is the runtime's own placement, not fitted to a DRAM budget.)
                bounded = search_decoding_no_slower(run.shape.n_expert > 0 ? std::filesystem::path{} : fitted_file, wl,
                                                    opts.budgets.dram, run.shape,
                                                    [&](double dram) { return search_device_within(dram, cpu_step_s); });
            }
            if (bounded && device_beats_cpu(bounded->best.prediction, cpu.best.prediction)) {
                run.unbounded_device = run.result.best.prediction;
                run.result = std::move(*bounded);
            } else {
                run.device_prediction = run.result.best.prediction;
                run.result = std::move(cpu);
            }
        }
    } catch (const OutOfBudget&) {
        // the CPU alone cannot hold it
    }
    return run;
}

}  // namespace

PlanRun run_planner(const PlanOptions& o, HardwareProfile hardware) {
    PlanRun run = plan_placement(o, std::move(hardware));
    // A model file's plan shows DRAM as the runtime counts it, with or without a budget (the
    // planner's own figure leaves out the runtime's buffers: every layer on a device showed 0 B).
    // A mixture of experts on a device is placed by the runtime itself.
    Plan& best = run.result.best;
    if (const auto file = plan_model_file(o); !file.empty() && !(best.has_gpu && run.shape.n_expert > 0))
        best.prediction.used.dram = std::max(best.prediction.used.dram,
                                             double(runtime::least_dram_for_plan(models::GgufFile::open(file), best, host_run(best, best.workload))));
    return run;
}

}  // namespace strata::cli
