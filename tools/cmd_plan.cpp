// `strata plan`: a dry run of the planner. Builds the hardware profile (file, catalog parts or
// this machine), the model shape (GGUF header or catalog) and the workload, searches the
// policies, and prints the chosen placement with its predicted speed, or the plan as JSON.
// It says when the workload cannot run there (it does not fit, even with NVMe) or misses its
// targets, and --export writes the launch of a distributed engine sized for it instead.
#include <iostream>

#include <fmt/format.h>

#include "core/bytes.h"
#include "core/error.h"
#include "core/file_write.h"
#include "planner/catalog.h"
#include "planner/op_offload.h"
#include "planner/plan_report.h"
#include "planner/policy_search.h"
#include "planner/units.h"
#include "tools/cli_options.h"
#include "tools/plan/plan_hardware.h"
#include "tools/plan/launch_export.h"
#include "tools/plan/plan_inputs.h"
#include "tools/server/plan_ui.h"

namespace strata::cli {

using namespace strata::planner;

namespace {

// The targets the plan's prediction misses, as one sentence; empty when it meets them all.
std::string missed_targets(const PlanOptions& o, const Prediction& p) {
    std::string out;
    const auto add = [&](const std::string& s) { out += (out.empty() ? "" : "; ") + s; };
    if (o.target_tps > 0 && p.decode_tps_per_seq < o.target_tps)
        add(fmt::format("decode at {:.3g} tokens/s a sequence misses --target-tps {}", p.decode_tps_per_seq, o.target_tps));
    if (o.target_ttft > 0 && p.ttft_s > o.target_ttft)
        add(fmt::format("the first token after {} misses --target-ttft {} s", format_seconds(p.ttft_s), o.target_ttft));
    if (o.target_throughput > 0 && p.throughput_tps < o.target_throughput)
        add(fmt::format("{:.3g} tokens/s in all misses --target-throughput {}", p.throughput_tps, o.target_throughput));
    return out;
}

// The cluster --export sizes for: nodes of --cluster-gpu (data-center GPUs unless told), not of
// this machine's GPU, which is what ran out.
ClusterRequest cluster_request(const PlanOptions& o) {
    const Catalog& catalog = Catalog::builtin();
    const std::string name = o.cluster_gpu.empty() ? "h100-80g" : o.cluster_gpu;
    const GpuEntry* gpu = catalog.find_gpu(name);
    if (!gpu) throw UsageError(fmt::format("--cluster-gpu '{}' is not a catalog GPU", name), fmt::format("use one of {}", catalog.gpu_names()));
    if (o.gpus_per_node < 1) throw UsageError(fmt::format("--gpus-per-node {} must be at least 1", o.gpus_per_node));
    ClusterRequest r;
    r.gpu = *gpu;
    r.gpus_per_node = o.gpus_per_node;
    r.target_tps = o.target_tps;
    r.efficiency = catalog.efficiency;
    return r;
}

int export_launch(const PlanOptions& o, const std::string& verdict) {
    const auto engine = launch_engine(o.export_engine);
    const LaunchInput in{plan_shape(o, plan_kv_type(o)), plan_workload(o), verdict};
    std::cout << launch_script(*engine, in, cluster_request(o));
    fmt::print(stderr, "strata: {}; the {} launch above is sized for a cluster\n", verdict, o.export_engine);
    return 0;
}

// The smallest value of `flag` (--dram or --dram-budget; within 1/512 of it) at which the workload plans, found by bisection between
// the one given and four times the weights; 0 where even that does not fit (the refusal's own
// hint says what to raise). Only on the path of a refusal: a dozen or so bisection steps, each a plan
// (and its few re-plans for the runtime's accounting, fit_runtime_dram).
uint64_t smallest_fitting_dram(const PlanOptions& o, std::string PlanOptions::*flag) {
    PlanOptions trial = o;
    const auto fits = [&](uint64_t bytes) {
        trial.*flag = std::to_string(bytes);
        try {
            run_planner(trial, load_hardware(trial));  // the capacity is the machine's
            return true;
        } catch (const GpuBudgetTooSmall&) {
            return true;  // the machine holds it there, the CPU alone; that refusal names the GPU's way out
        } catch (const OutOfBudget&) {
            return false;
        }
    };
    uint64_t lo = parse_memory_size(o.*flag), hi = 4 * plan_shape(o, plan_kv_type(o)).total_weight_bytes() + (64ull << 20);
    if (lo >= hi || !fits(hi)) return 0;
    while (hi - lo > std::max<uint64_t>(hi / 512, 1u << 16)) {
        const uint64_t mid = lo + (hi - lo) / 2;
        (fits(mid) ? hi : lo) = mid;
    }
    return hi;
}

// The runtime's --dram for the plan's DRAM budget, if one was given: --dram as written, a
// --dram-budget (perhaps a share of --dram) in bytes.
std::string dram_flag(const PlanOptions& o, double budget) {
    if (!o.dram_budget.empty()) return fmt::format(" --dram {}", static_cast<uint64_t>(budget));
    return o.dram.empty() ? "" : " --dram " + o.dram;
}

}  // namespace

int run_plan(const PlanOptions& given) {
    PlanOptions o = given;
    // A share of this machine's memory, as the engine's commands read --dram 40%.
    if (o.dram.find('%') != std::string::npos && !names_catalog_parts(o) && o.hw.empty())
        o.dram = std::to_string(parse_memory_size(o.dram));
    // --dram 0 is no limit, as the engine's commands take it: the machine's own memory.
    if (is_zero_size(o.dram)) {
        o.dram.clear();
    } else if (const uint64_t env = env_dram_budget(); env && o.dram.empty() && !names_catalog_parts(o) && o.hw.empty()) {
        // The engine's commands given no --dram hold $STRATA_DRAM: this machine's plan is for it too.
        o.dram = std::to_string(env);
    }
    if (o.ui) {
        // The page plans in the browser: what the command would print or write has no place there.
        for (const auto& [given, flag] : {std::pair{!o.export_engine.empty(), "--export"}, {o.json, "--json"}, {!o.out.empty(), "-o"},
                                          {!o.svg.empty(), "--svg"}})
            if (given)
                throw UsageError(fmt::format("{} writes this command's plan, and --ui serves the planner page instead", flag),
                                 fmt::format("run the command without --ui for {}, or the page without {}", flag, flag));
        return server::run_plan_ui(o);
    }
    if (!o.export_engine.empty() && !launch_engine(o.export_engine))
        throw UsageError(fmt::format("--export '{}' is not an engine Strata writes launches for", o.export_engine),
                         fmt::format("use {}", kLaunchEngines));
    if (!o.export_engine.empty() && o.json)
        throw UsageError("--export prints a launch script and --json the plan: one output at a time",
                         "run the command once with each");
    PlanRun run;
    try {
        run = run_planner(o, load_hardware(o));
    } catch (const GpuBudgetTooSmall&) {
        throw;  // the machine holds it: the budget is what to change
    } catch (const OutOfBudget& e) {
        const std::string verdict = fmt::format("the workload does not fit this machine, even with its NVMe ({})", e.what());
        if (!o.export_engine.empty()) return export_launch(o, verdict);
        // The --dram that fits, or the --dram-budget where that alone (a size) was given.
        const bool by_budget = o.dram.empty() && !o.dram_budget.empty() && o.dram_budget.find('%') == std::string::npos;
        const uint64_t dram_fits = by_budget ? smallest_fitting_dram(o, &PlanOptions::dram_budget)
                                   : o.dram.empty() ? 0 : smallest_fitting_dram(o, &PlanOptions::dram);
        const std::string smallest =
            dram_fits ? fmt::format("{} {} fits; ", by_budget ? "--dram-budget" : "--dram", format_bytes_at_least(dram_fits)) : "";
        throw OutOfBudget(verdict, fmt::format("{}{}{}--export vllm|sglang|llama-rpc writes the launch of a distributed engine sized for it",
                                               smallest, e.hint(), e.hint().empty() ? "" : "; or "));
    }
    const std::string missed = missed_targets(o, run.result.best.prediction);
    if (!o.export_engine.empty())
        return export_launch(o, missed.empty() ? "it fits this machine and meets its targets; the launch was asked for"
                                               : fmt::format("on this machine, {}", missed));
    const SearchResult& r = run.result;
    const ModelShape& shape = run.shape;
    const HardwareProfile& hw = run.hw;
    // Planned as asked, but the model was not trained for it: its answers past that are not to be trusted.
    if (const int64_t positions = int64_t(r.best.workload.prompt_len) + r.best.workload.gen_len;
        shape.n_ctx_train > 0 && positions > shape.n_ctx_train)
        fmt::print(stderr, "strata: warning: the workload's {} positions (prompt and reply) are more than the {} {} was trained "
                           "for\n", positions, shape.n_ctx_train, shape.name);
    const std::string json = r.best.to_json();
    // Whole or not at all (a full disk leaves no half plan), with the system's reason.
    if (!o.out.empty()) write_file_whole(o.out, json + "\n", "the plan", "is the disk full, or the folder missing or read-only?");
    if (const auto file = local_model_file(o); !o.out.empty() && !file.empty() && !r.best.has_gpu) {
        // The run it was checked for (fit_runtime_dram): one sequence, or a batch of them sharing
        // a KV cache of their contexts.
        const int batch = std::max(1, r.best.policy.batch), ctx = r.best.workload.kv_positions();
        const std::string run = batch == 1 ? "generate" : "batch";
        // A plan for the CPU alone on a machine with a GPU: the runtime would otherwise bring the GPU in.
        fmt::print(stderr, "strata: to run by this plan: strata {} -m {} --plan {}{} --ctx {}{}{}\n", run, file.string(), o.out,
                   dram_flag(o, r.best.budgets.dram), batch * ctx, hw.gpu ? " --gpu-mem 0" : "",
                   batch == 1 ? "" : fmt::format(" --max-batch {} -i REQUESTS.jsonl -o ANSWERS.jsonl", batch));
    }
    if (!o.svg.empty()) write_file_whole(o.svg, plan_svg(r.best, shape, hw), "the timeline SVG", "is the disk full, or the folder missing or read-only?");
    const std::string way_out = "`--export vllm|sglang|llama-rpc` writes the launch of a distributed engine sized for it";
    if (o.json) {
        std::cout << json << "\n";
        if (!run.gpu_left_out.empty()) fmt::print(stderr, "strata: the plan is the CPU alone's: {}\n", run.gpu_left_out);
        if (!missed.empty()) fmt::print(stderr, "strata: this machine misses the workload's targets: {}; {}\n", missed, way_out);
        return 0;
    }
    std::cout << format_plan(r.best, shape, hw, {r.n_policies, r.seconds});
    if (run.device_prediction)
        fmt::print("\nThe plan above is the CPU alone's: the best plan with the GPU decodes at {:.3g} tokens/s (TTFT {}), not "
                   "{:.0f}% faster than its {:.3g} (TTFT {}), nor as fast and {:.0f}% sooner over the workload (a near tie "
                   "goes to the CPU alone).\n",
                   run.device_prediction->decode_tps_per_seq, format_seconds(run.device_prediction->ttft_s),
                   (planner::kDeviceWinMargin - 1) * 100, r.best.prediction.decode_tps_per_seq,
                   format_seconds(r.best.prediction.ttft_s), (planner::kDeviceWinMargin - 1) * 100);
    else if (!run.gpu_left_out.empty())
        fmt::print("\nThe plan above is the CPU alone's: {}.\n", run.gpu_left_out);
    else if (run.cpu_alone)
        fmt::print("\nThe CPU alone: {:.3g} tokens/s decode, TTFT {} (this plan: {:.3g} tokens/s).\n",
                   run.cpu_alone->decode_tps_per_seq, format_seconds(run.cpu_alone->ttft_s), r.best.prediction.decode_tps_per_seq);
    // A mixture's prompt passes on the device: the figures above leave it out, as the engine's
    // headline does (its --show-plan's prefill line gives it).
    if (const Workload& wl = r.best.workload; r.best.experts.op_offload_rows > 0 && wl.batch == 1) {
        const double saved = op_offload_saving_s(shape, hw, r.best, wl.prompt_len, static_cast<int32_t>(ModelShape::kPassRows),
                                                 r.best.experts.op_offload_rows);
        fmt::print("With op offload (prompt passes of {}+ rows on the GPU): TTFT {}.\n", r.best.experts.op_offload_rows,
                   format_seconds(with_saving(r.best.prediction, saved, wl).ttft_s));
    }
    if (run.unbounded_device)
        fmt::print("The best plan with the GPU over the workload decodes at {:.3g} tokens/s (TTFT {}), slower than the CPU "
                   "alone: this one was searched again to decode no slower.\n",
                   run.unbounded_device->decode_tps_per_seq, format_seconds(run.unbounded_device->ttft_s));
    if (!missed.empty()) fmt::print("\nThis machine misses the workload's targets: {}.\n{}.\n", missed, way_out);
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
