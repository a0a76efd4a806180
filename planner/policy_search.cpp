#include "planner/policy_search.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"
#include "planner/cost_model.h"
#include "planner/lp_placement.h"
#include "planner/rounding.h"
#include "planner/units.h"

namespace strata::planner {

Budgets default_budgets(const HardwareProfile& hw) {
    Budgets b;
    if (hw.has_gpu()) {
        const double mem = static_cast<double>(hw.gpu->memory_bytes);
        b.gpu = std::max(0.0, mem - std::max(512.0 * 1024 * 1024, 0.04 * mem));
    }
    b.dram = 0.9 * static_cast<double>(hw.dram.capacity_bytes);
    b.nvme = 0.95 * static_cast<double>(hw.nvme.capacity_bytes);
    return b;
}

namespace {

std::vector<int32_t> batch_candidates(const Workload& wl) {
    if (wl.objective == Objective::Latency) return {wl.batch};
    std::vector<int32_t> v;
    for (int32_t b = 1; b < wl.batch; b *= 2) v.push_back(b);
    v.push_back(wl.batch);
    return v;
}

// The best whole-layer plan for one policy, or nullopt when none fits. The LP is solved per
// case (lp_cases); the least relaxed objective is the policy's lower bound. Each case's
// answer is then re-solved with its single units fixed to each option it gave them (the output
// head to each it may take), and with staging reserved for whole layers, and rounded. With
// `max_decode_s` (PlannerOptions::max_decode_step_s), only plans whose decode step is within it.
std::optional<Plan> plan_policy(const CostModel& cm, const Budgets& budgets, const std::vector<LayerGroup>& groups, const Plan& header,
                                double max_decode_s) {
    double bound = INFINITY;
    std::optional<Plan> best;
    auto used = [](const auto& shares) {
        std::vector<int> v;
        for (size_t i = 0; i < shares.size(); ++i)
            if (shares[i] > 1e-6) v.push_back(static_cast<int>(i));
        return v;
    };
    for (LpCase lc : lp_cases(cm, groups)) {
        lc.max_decode_s = max_decode_s;
        const LpSolution relaxed = solve_placement(cm, budgets, groups, lc);
        if (!relaxed.feasible) continue;
        bound = std::min(bound, relaxed.objective_s);
        const bool has_embd = cm.shape().embd_bytes > 0;
        // The head is one unit whose place moves layers: every place it may take, not only
        // those the relaxation shared it over (a head on the device for a layer less there).
        std::vector<int> outputs;
        for (int o = 0; o < kNumWeightOptions; ++o)
            if (cm.allowed_output(static_cast<WeightOption>(o))) outputs.push_back(o);
        for (int out : outputs)
            for (int embd : has_embd ? used(relaxed.embedding) : std::vector<int>{-1})
                for (int hid : used(relaxed.hidden)) {
                    LpCase fixed = lc;
                    fixed.output = static_cast<WeightOption>(out);
                    if (embd >= 0) fixed.embedding = static_cast<WeightOption>(embd);
                    fixed.hidden = static_cast<HiddenOption>(hid);
                    // Whole layers need all of a streamed layer's staging, not a share of it.
                    fixed.min_gpu_staging = std::max(lc.min_gpu_staging, relaxed.gpu_staging_need);
                    fixed.min_dram_staging = std::max(lc.min_dram_staging, relaxed.dram_staging_need);
                    LpSolution sol = solve_placement(cm, budgets, groups, fixed);
                    if (!sol.feasible) {
                        // The reservation can be too much for a case that barely fits: round as is.
                        fixed.min_gpu_staging = lc.min_gpu_staging, fixed.min_dram_staging = lc.min_dram_staging;
                        sol = solve_placement(cm, budgets, groups, fixed);
                        if (!sol.feasible) continue;
                    }
                    Plan p = header;
                    if (!round_plan(cm, budgets, sol, p, max_decode_s)) continue;
                    p.lp_objective_s = sol.objective_s;
                    p.lp_groups = sol.groups;
                    if (!best || p.prediction.objective_s < best->prediction.objective_s) best = std::move(p);
                }
    }
    if (!best) return std::nullopt;
    best->lp_bound_s = bound;
    best->rounding_loss = bound > 0 ? (best->prediction.objective_s - bound) / bound : 0;
    if (std::fabs(best->rounding_loss) < 1e-9) best->rounding_loss = 0;  // no "-0.00%"
    return best;
}

}  // namespace

Plan plan_header(const ModelShape& shape, const HardwareProfile& hw, const Workload& wl, const Budgets& budgets,
                 const Policy& pol) {
    Plan p;
    p.model_name = shape.name;
    p.n_layer = shape.n_layer;
    p.model_weight_bytes = shape.total_weight_bytes();
    p.weight_type = shape.weight_type;
    p.hardware = hw.summary();
    p.budgets = budgets;
    p.workload = wl;
    p.policy = pol;
    p.has_gpu = hw.has_gpu();
    return p;
}

SearchResult search_plans(const ModelShape& shape, const HardwareProfile& hw, const Workload& wl, const PlannerOptions& opts) {
    wl.validate();
    hw.validate();
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<LayerGroup> groups = group_layers(shape);
    SearchResult r;
    std::vector<bool> cpu_attn{!hw.has_gpu()};
    if (hw.has_gpu() && opts.require_cpu_attention) cpu_attn = {true};
    else if (hw.has_gpu() && opts.allow_cpu_attention) cpu_attn = {false, true};
    const std::vector<bool> recompute = opts.allow_recompute ? std::vector<bool>{false, true} : std::vector<bool>{false};
    for (DType kv : opts.kv_types)
        for (int32_t batch : batch_candidates(wl))
            for (int32_t m = 1; m <= std::min(batch, opts.max_micro); m *= 2) {
                if (batch % m != 0) continue;
                for (bool ca : cpu_attn)
                    for (bool rc : recompute) {
                        const Policy pol{batch, m, ca, rc, kv};
                        ++r.n_policies;
                        const CostModel cm(shape, hw, wl, pol, opts.limits);
                        std::optional<Plan> p = plan_policy(cm, opts.budgets, groups, plan_header(shape, hw, wl, opts.budgets, pol),
                                                                opts.max_decode_step_s);
                        if (p) r.candidates.push_back(std::move(*p));
                    }
            }
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r.candidates.empty() && opts.max_decode_step_s > 0)
        throw OutOfBudget(fmt::format("no placement of {} decodes a step within {} in these budgets", shape.name,
                                      format_seconds(opts.max_decode_step_s)));
    if (r.candidates.empty())
        throw OutOfBudget(explain_infeasible(shape, hw, wl, opts), opts.infeasible_hint);
    // Best first; among equals, fewer sequences and micro-batches (simpler to run).
    std::stable_sort(r.candidates.begin(), r.candidates.end(), [](const Plan& a, const Plan& b) {
        return a.prediction.objective_s < b.prediction.objective_s * (1 - 1e-9);
    });
    r.best = r.candidates.front();
    const auto& b = r.best;
    STRATA_LOG_INFO("planner: {} policies in {:.3f} s; best batch {} x{} micro, cpu attention {}, recompute {}, KV {}: "
                    "{:.4g} s/token (LP bound {:.4g}, rounding loss {:.2f}%)",
                    r.n_policies, r.seconds, b.policy.batch, b.policy.n_micro, b.policy.cpu_attention, b.policy.recompute,
                    dtype_name(b.policy.kv_type), b.prediction.objective_s, b.lp_bound_s, 100 * b.rounding_loss);
    return r;
}

Prediction evaluate_plan(const ModelShape& shape, const HardwareProfile& hw, const Workload& wl, const Plan& plan,
                         const RuntimeLimits& limits) {
    plan.check_matches(shape);
    if (plan.has_gpu && !hw.has_gpu())
        throw UsageError("the plan uses a GPU but this hardware profile has none", "make a new plan with `strata plan`");
    const CostModel cm(shape, hw, wl, plan.policy, limits);
    return cm.predict(plan);
}

std::vector<Plan> frontier(const SearchResult& r) {
    std::vector<Plan> out;
    for (const auto& p : r.candidates) {
        bool dominated = false;
        for (const auto& q : r.candidates)
            if (q.prediction.decode_tps_per_seq >= p.prediction.decode_tps_per_seq &&
                q.prediction.throughput_tps >= p.prediction.throughput_tps &&
                (q.prediction.decode_tps_per_seq > p.prediction.decode_tps_per_seq || q.prediction.throughput_tps > p.prediction.throughput_tps))
                dominated = true;
        if (!dominated) out.push_back(p);
    }
    std::sort(out.begin(), out.end(), [](const Plan& a, const Plan& b) { return a.prediction.throughput_tps < b.prediction.throughput_tps; });
    return out;
}

std::string explain_infeasible(const ModelShape& shape, const HardwareProfile& hw, const Workload& wl, const PlannerOptions& opts) {
    const Budgets& b = opts.budgets;
    const int32_t min_batch = wl.objective == Objective::Latency ? wl.batch : 1;
    DType smallest_kv = opts.kv_types.front();
    for (DType t : opts.kv_types)
        if (type_bytes(t, 1) < type_bytes(smallest_kv, 1)) smallest_kv = t;
    ModelShape s = shape;
    s.kv_type = smallest_kv;
    const double weights = static_cast<double>(shape.total_weight_bytes());
    const double kv = static_cast<double>(min_batch) * wl.kv_positions() * s.kv_bytes_per_token() * shape.n_layer;
    const double total = b.gpu + b.dram + b.nvme;
    if (weights + kv > total)
        return fmt::format("{} needs {} of weights plus {} of KV cache ({} x {} tokens), but the budgets total {} "
                           "(GPU {}, DRAM {}, NVMe {}): {} more is needed",
                           shape.name, format_size(weights), format_size(kv), min_batch, wl.context_len(), format_size(total),
                           format_size(b.gpu), format_size(b.dram), format_size(b.nvme), format_size(weights + kv - total));
    // The smallest working set: one micro-batch of one sequence.
    const CostModel cm(shape, hw, wl, Policy{min_batch, 1, false, false, smallest_kv});
    const Cost fixed = cm.fixed();
    double max_layer = 0;
    for (const auto& l : shape.layers) max_layer = std::max(max_layer, static_cast<double>(l.weight_bytes));
    const std::string gpu = format_size(b.gpu) + (opts.gpu_budget_note.empty() ? "" : " (" + opts.gpu_budget_note + ")");
    // The output head where the device computes it, unless the runtime holds it apart.
    const double head = opts.limits.head_on_device && !opts.limits.dram_held_apart ? static_cast<double>(shape.output_bytes) : 0;
    if (hw.has_gpu() && b.gpu < fixed.bytes[0] + 2 * max_layer + head)
        return fmt::format("the GPU budget {} is below the minimum working set {} (activations of a {}-token prompt's passes of "
                           "at most {} rows{} two layers of weights double-buffered)",
                           gpu, format_size(fixed.bytes[0] + 2 * max_layer + head), wl.prompt_len, ModelShape::kPassRows,
                           head > 0 ? fmt::format(", the output head ({}), which the device computes, and", format_size(head)) : " and");
    // (A runtime that holds its ring apart stages them there.)
    if (!opts.limits.dram_held_apart && b.dram < fixed.bytes[1] + 2 * max_layer)
        return fmt::format("the DRAM budget {}{} cannot stage layers read from NVMe (needs {})", format_size(b.dram),
                           opts.dram_budget_note.empty() ? "" : " (" + opts.dram_budget_note + ")",
                           format_size(fixed.bytes[1] + 2 * max_layer));
    return fmt::format("no placement of {} fits GPU {}, DRAM {}, NVMe {} for batch {} x {} tokens", shape.name, gpu,
                       format_size(b.dram), format_size(b.nvme), min_batch, wl.context_len());
}

namespace {
// The whole workload (the objective: its prompt's prefill included) by the margin sooner.
bool workload_sooner(const Prediction& with_device, const Prediction& cpu_alone) {
    return with_device.objective_s > 0 && kDeviceWinMargin * with_device.objective_s < cpu_alone.objective_s;
}
}  // namespace

bool device_beats_cpu(const Prediction& with_device, const Prediction& cpu_alone) {
    if (with_device.decode_tps_per_seq > kDeviceWinMargin * cpu_alone.decode_tps_per_seq) return true;
    // Decoding no slower and the workload sooner: a long prompt and a short answer, whose prefill
    // the CPU alone takes seconds on.
    return with_device.decode_tps_per_seq >= cpu_alone.decode_tps_per_seq && workload_sooner(with_device, cpu_alone);
}

bool trades_decode_for_prefill(const Prediction& with_device, const Prediction& cpu_alone) {
    return with_device.decode_tps_per_seq < cpu_alone.decode_tps_per_seq && workload_sooner(with_device, cpu_alone);
}

}  // namespace strata::planner
