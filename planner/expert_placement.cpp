#include "planner/expert_placement.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>

#include "core/kernel_shapes.h"
#include "planner/json_util.h"
#include "planner/op_offload.h"
#include "planner/units.h"

namespace strata::planner {

using json_util::get;
using json_util::json;

uint64_t expert_bytes(const ModelShape& s) {
    uint64_t most = 0;
    for (const LayerShape& l : s.layers) most = std::max(most, s.n_expert ? l.expert_bytes / s.n_expert : 0);
    return most;
}

bool ExpertPlan::has_device() const { return n_device() > 0; }

int32_t ExpertPlan::n_device() const {
    int32_t n = 0;
    for (const auto& l : device) n += static_cast<int32_t>(l.size());
    return n;
}

double ExpertPlan::device_share_of(int il) const {
    return static_cast<size_t>(il) < device_share.size() ? device_share[static_cast<size_t>(il)] : 0.0;
}

double ExpertPlan::device_share_mean() const {
    double sum = 0;
    for (double d : device_share) sum += d;
    return device_share.empty() ? 0 : sum / static_cast<double>(device_share.size());
}

ExpertPlan place_experts(const ModelShape& s, const RoutingProfile* routing, const std::string& routing_note,
                         int32_t cache_slots, uint64_t slot_bytes, const std::vector<bool>& offloaded,
                         const DeviceExperts& on_device) {
    auto is_offloaded = [&](int il) { return offloaded.empty() || offloaded[static_cast<size_t>(il)]; };
    auto marked = [](const std::vector<bool>& v, int il) { return static_cast<size_t>(il) < v.size() && v[static_cast<size_t>(il)]; };
    ExpertPlan x;
    x.n_expert = s.n_expert;
    x.cache_slots = cache_slots;
    x.slot_bytes = slot_bytes;
    x.routing = routing ? fmt::format("measured: {} ({} tokens)", routing->path.string(), routing->tokens)
                        : fmt::format("uniform ({})", routing_note);
    const int L = s.n_layer, N = s.n_expert;
    const double K = s.n_expert_used;
    // Each expert's chance of being among a token's K choices in its layer.
    struct Choice {
        double p;
        int32_t layer, expert;
    };
    std::vector<Choice> all;
    for (int il = 0; il < L; ++il) {
        uint64_t total = 0;
        if (routing) total = std::accumulate(routing->counts[il].begin(), routing->counts[il].end(), uint64_t{0});
        for (int e = 0; e < N; ++e)
            all.push_back({total ? K * double(routing->counts[il][e]) / double(total) : K / N, il, e});
    }
    // The most chosen first; ties spread over the layers (expert index, then layer).
    std::stable_sort(all.begin(), all.end(), [](const Choice& a, const Choice& b) {
        return a.p > b.p || (a.p == b.p && (a.expert < b.expert || (a.expert == b.expert && a.layer < b.layer)));
    });
    // The device first: the layers given to it whole, then the most chosen of the rest.
    std::vector<bool> taken(all.size(), false);
    if (on_device.slots > 0 || !on_device.layers.empty() || !on_device.held.empty()) {
        x.device.assign(static_cast<size_t>(L), {});
        x.device_share.assign(static_cast<size_t>(L), 0.0);
    }
    auto hold = [&](size_t i) {
        taken[i] = true;
        x.device[all[i].layer].push_back(all[i].expert);
        if (K > 0) x.device_share[all[i].layer] += all[i].p / K;
    };
    auto is_held = [&](const Choice& c) {
        if (static_cast<size_t>(c.layer) >= on_device.held.size()) return false;
        const std::vector<int32_t>& h = on_device.held[static_cast<size_t>(c.layer)];
        return std::find(h.begin(), h.end(), c.expert) != h.end();
    };
    int32_t device_left = std::max(0, on_device.slots);
    if (!on_device.held.empty()) {
        for (size_t i = 0; i < all.size(); ++i)
            if (is_held(all[i])) hold(i);
    } else {
        for (bool whole : {true, false})
            for (size_t i = 0; i < all.size(); ++i) {
                if (taken[i] || whole != marked(on_device.layers, all[i].layer) || marked(on_device.host_only, all[i].layer))
                    continue;
                if (!whole && device_left-- <= 0) break;
                hold(i);
            }
    }
    // Then the DRAM cache: the most chosen of the offloaded layers' other experts.
    x.dram.assign(static_cast<size_t>(L), {});
    double held = 0, off_device = 0;
    int n_offloaded = 0, n_cacheable = 0;
    for (int il = 0; il < L; ++il)
        if (is_offloaded(il)) ++n_offloaded, off_device += K * (1 - x.device_share_of(il));
    int32_t dram_left = std::max(0, cache_slots);
    for (size_t i = 0; i < all.size(); ++i) {
        if (taken[i] || !is_offloaded(all[i].layer)) continue;
        ++n_cacheable;
        if (dram_left-- <= 0) continue;
        held += all[i].p;
        x.dram[all[i].layer].push_back(all[i].expert);
    }
    x.enabled = n_offloaded > 0;
    x.hit_rate = off_device > 0 ? std::min(1.0, held / off_device) : 1;
    // A cache of this size seen before: its decode hit rate counts the routing's locality from
    // token to token, which the counts above cannot.
    const double share = n_cacheable ? std::min(1.0, double(std::max(0, cache_slots)) / n_cacheable) : 1;
    if (const auto seen = routing ? routing->observed_hit_rate(share) : std::nullopt; seen && n_cacheable) {
        x.hit_rate = *seen;
        x.routing += fmt::format("; hit rate observed at a cache of {:.1f}% of the experts", 100 * share);
    }
    double active = static_cast<double>(s.output_bytes), experts = 0;
    for (int il = 0; il < L; ++il) {
        const LayerShape& l = s.layers[static_cast<size_t>(il)];
        active += static_cast<double>(l.weight_bytes - l.expert_bytes);
        const double chosen = N ? static_cast<double>(l.expert_bytes) * K / N : 0;
        experts += chosen;
        x.device_bytes_per_token += chosen * x.device_share_of(il);
        if (is_offloaded(il)) x.nvme_bytes_per_token += chosen * (1 - x.device_share_of(il)) * (1 - x.hit_rate);
    }
    x.active_bytes_per_token = active + experts;
    return x;
}

int32_t expert_slots_for(const ModelShape& s, const Workload& wl, DType kv_type, double dram, uint64_t slot_bytes) {
    double fixed = static_cast<double>(s.output_bytes + s.embd_bytes + s.other_bytes);
    for (const LayerShape& l : s.layers) fixed += static_cast<double>(l.weight_bytes - l.expert_bytes);
    ModelShape kv = s;
    kv.kv_type = kv_type;
    // The KV cache as the runtime holds it: its whole context where that is more than the request's.
    fixed += s.n_layer * wl.batch * double(wl.kv_positions()) * kv.kv_bytes_per_token();
    // The prefill working set, as CostModel::fixed counts it.
    fixed += s.prefill_working_set_bytes(double(wl.batch) * wl.prompt_len, wl.batch);
    if (dram <= fixed || slot_bytes == 0) return 0;
    const double most = double(s.n_layer) * s.n_expert;
    return static_cast<int32_t>(std::min(most, std::floor((dram - fixed) / double(slot_bytes))));
}

Plan expert_offload_plan(const ModelShape& s, const HardwareProfile& hw, const Workload& wl, const Budgets& budgets,
                         DType kv_type, const ExpertPlan& experts, const std::vector<bool>& offloaded) {
    Policy policy;
    policy.batch = wl.batch;
    Plan p = plan_header(s, hw, wl, budgets, policy);
    p.policy.cpu_attention = true;
    p.policy.kv_type = kv_type;
    p.output = p.embedding = WeightOption::DramCpu;
    p.hidden = HiddenOption::Dram;
    for (int32_t il = 0; il < s.n_layer; ++il) {
        const bool off = offloaded.empty() || offloaded[static_cast<size_t>(il)];
        p.layers.push_back({il, off ? WeightOption::NvmeCpu : WeightOption::DramCpu, KvOption::Dram, Device::Cpu});
    }
    p.experts = experts;
    p.prediction = evaluate_plan(s, hw, wl, p);
    return p;
}

std::optional<Plan> offload_if_better(const ModelShape& s, const HardwareProfile& hw, const Workload& wl,
                                      const Budgets& budgets, DType kv_type, const RoutingProfile* routing,
                                      const std::string& routing_note, const Plan* best) {
    if (s.n_expert == 0) return std::nullopt;
    const uint64_t slot = expert_bytes(s);
    const int32_t slots = expert_slots_for(s, wl, kv_type, budgets.dram, slot);
    if (slots < s.n_expert) return std::nullopt;  // a pass may choose every expert of a layer
    Plan p = expert_offload_plan(s, hw, wl, budgets, kv_type, place_experts(s, routing, routing_note, slots, slot));
    if (best && best->prediction.objective_s <= p.prediction.objective_s) return std::nullopt;
    return p;
}

namespace {

// The routing statistics saved beside the model file (shape.source), or none, `note` saying why.
std::optional<RoutingProfile> saved_routing(const ModelShape& s, std::string& note) {
    note = "no model file to keep routing statistics beside";
    std::error_code ec;
    if (s.source == "catalog" || !std::filesystem::is_regular_file(s.source, ec)) return std::nullopt;
    return load_routing_profile(s.source, std::filesystem::file_size(s.source), s.n_layer, s.n_expert, &note);
}

// The device memory the runtime's scratch for the experts a device computes takes
// (runtime/exec/device/device_experts.h), the experts' width from their three matrices.
double device_expert_scratch_bytes(const ModelShape& s) {
    for (const LayerShape& l : s.layers) {
        if (l.n_expert_params <= 0 || s.n_expert <= 0 || s.n_embd <= 0) continue;
        const auto n_ff_exp = std::llround(static_cast<double>(l.n_expert_params) / (3.0 * s.n_embd * s.n_expert));
        return static_cast<double>(strata::device_expert_scratch_bytes(static_cast<int64_t>(ModelShape::kPassRows),
                                                                        s.n_expert_used, s.n_embd, n_ff_exp));
    }
    return 0;
}

// A mixture of experts beside a GPU, as the device runtime runs it (runtime/place/run_layout.cpp,
// layout_moe_with_gpu): the weights where the CPU alone's plan puts them, every layer's attention
// on the GPU (its KV cache there where it fits), the GPU memory left holding the most chosen
// experts where they make a token faster.
SearchResult moe_beside_gpu(const ModelShape& s, const HardwareProfile& hw, const Workload& wl, const PlannerOptions& opts) {
    HardwareProfile alone = hw;
    alone.gpu.reset();
    PlannerOptions host_opts = opts;
    host_opts.budgets.gpu = 0;
    host_opts.max_decode_step_s = 0;  // the host's plan is the CPU alone's; a bound weighs the slots below
    SearchResult r = search_with_expert_offload(s, alone, wl, host_opts);
    Plan host = r.best;
    host.budgets.gpu = opts.budgets.gpu;
    // With the KV cache in DRAM and the CPU attending to decode, the device still attends to a
    // prompt's passes, over one layer's blocks staged there (as the runtime lays it out:
    // runtime/place/run_layout.cpp): the cost model counts that layer in the plan's GPU memory.
    std::optional<Plan> on_gpu = attention_on_gpu_if_fits(host, s, hw);
    if (!on_gpu) {
        const std::string hint = "give the GPU more memory, or plan for the CPU alone with --gpu-budget 0";
        const Plan kv_in_dram = with_attention_on_gpu(host, s, hw, false);
        const double staged = double(kv_in_dram.policy.batch) / kv_in_dram.policy.n_micro * kv_in_dram.workload.kv_positions() *
                              s.kv_bytes_per_token(kv_in_dram.policy.kv_type);
        if (kv_in_dram.prediction.used.gpu - staged <= opts.budgets.gpu)
            throw OutOfBudget(fmt::format("the GPU budget {} cannot hold every layer's attention weights, the output head, "
                                          "activations and the layer of the KV cache a prompt's pass stages there ({})",
                                          format_size(opts.budgets.gpu), format_size(staged)),
                              hint);
        throw OutOfBudget(fmt::format("the GPU budget {} cannot hold every layer's attention weights, the output head and "
                                      "activations, which a mixture of experts puts on the GPU",
                                      format_size(opts.budgets.gpu)),
                          hint);
    }
    // What the experts and op offload's slots may take: the GPU memory left beside attention and
    // the experts' scratch, which the runtime sets aside there (run_layout.cpp's `taken`).
    const double scratch = device_expert_scratch_bytes(s);
    const double left = on_gpu->budgets.gpu - on_gpu->prediction.used.gpu - scratch, slot = double(expert_bytes(s));
    // The experts `room` bytes of the GPU hold.
    const auto held_in = [&](double room) {
        DeviceExperts want;
        want.slots = room > 0 && slot > 0 ? static_cast<int32_t>(std::min(room / slot, double(s.n_layer) * s.n_expert)) : 0;
        return want;
    };
    std::string note;
    const std::optional<RoutingProfile> routing = saved_routing(s, note);
    r.best = with_experts_on_gpu(*on_gpu, s, hw, routing ? &*routing : nullptr, note, held_in(left));
    // Op offload's two slots of the largest layer in place of experts, where the workload's prompt
    // gains more than decode loses (as the device runtime weighs it: runtime/place/expert_offload.cpp).
    double largest = 0;
    for (const LayerShape& l : s.layers) largest = std::max(largest, static_cast<double>(l.weight_bytes));
    // (The host rebuilds the layers it copies in a pinned buffer of the largest, at least one.)
    const double dram_left = r.best.budgets.dram - r.best.prediction.used.dram;
    if (opts.limits.op_offload && left > 2 * largest && dram_left >= largest) {
        Plan with = with_experts_on_gpu(*on_gpu, s, hw, routing ? &*routing : nullptr, note, held_in(left - 2 * largest));
        const auto one_sequence = [&](const Plan& q) {
            Plan one = q;
            one.workload.batch = one.policy.batch = one.policy.n_micro = 1;
            return evaluate_plan(s, hw, one.workload, one).total_s;
        };
        const auto max_rows = static_cast<int32_t>(ModelShape::kPassRows);
        // Searched again to decode no slower than the CPU alone (PlannerOptions::max_decode_step_s):
        // the slots only where the plan with them still does.
        const bool within = opts.max_decode_step_s <= 0 || with.prediction.decode.time_s <= opts.max_decode_step_s;
        if (const int32_t rows = rows_if_slots_pay(s, hw, with, r.best, max_rows, one_sequence); rows > 0 && within) {
            with.experts.op_offload_rows = rows;
            // The headline prediction leaves op offload's saving out, as the engine's plan does
            // (its --show-plan prints the saving on a line of its own); its slots are in use.
            with.prediction.used.gpu += 2 * largest;
            r.best = std::move(with);
        }
    }
    // The scratch is in the GPU's use where it computes experts (held, or copied in).
    if (r.best.experts.n_device() > 0 || r.best.experts.op_offload_rows > 0) r.best.prediction.used.gpu += scratch;
    r.candidates = {r.best};
    return r;
}

}  // namespace

SearchResult search_with_expert_offload(const ModelShape& s, const HardwareProfile& hw, const Workload& wl,
                                        const PlannerOptions& opts) {
    if (s.n_expert > 0 && hw.has_gpu() && opts.budgets.gpu > 0) return moe_beside_gpu(s, hw, wl, opts);
    SearchResult r;
    std::optional<OutOfBudget> no_fit;
    try {
        r = search_plans(s, hw, wl, opts);
    } catch (const OutOfBudget& e) {
        if (s.n_expert == 0) throw;
        no_fit = e;
    }
    if (s.n_expert == 0) return r;
    std::string note;
    const std::optional<RoutingProfile> routing = saved_routing(s, note);
    if (auto p = offload_if_better(s, hw, wl, opts.budgets, opts.kv_types.front(), routing ? &*routing : nullptr, note,
                                   no_fit ? nullptr : &r.best))
        r.best = std::move(*p);
    else if (no_fit)  // the dense plans' reason, and that the experts' cache does not help either
        throw OutOfBudget(fmt::format("{}; nor with its routed experts read through a DRAM cache", no_fit->what()), no_fit->hint());
    return r;
}

namespace {
// "; 12 experts held on the device (31.0% of a token's choices, 1.2 MiB of its reads)", or empty.
std::string device_part(const ExpertPlan& e) {
    if (!e.has_device()) return "";
    return fmt::format("; {} experts held on the device ({:.1f}% of a token's choices, {} of its reads)", e.n_device(),
                       100 * e.device_share_mean(), format_size(e.device_bytes_per_token));
}
// "; prompts' passes of 22+ rows copy ...", or empty.
std::string op_offload_part(const ExpertPlan& e) {
    if (e.op_offload_rows <= 0 || !e.attention_on_gpu) return "";
    return fmt::format("; prompts' passes of {}+ rows copy the layers whose experts are in DRAM to the GPU and compute "
                       "them there (op offload)",
                       e.op_offload_rows);
}
}  // namespace

std::string expert_line(const ExpertPlan& e) {
    const std::string where = !e.attention_on_gpu ? "experts: "
                              : e.kv_on_gpu    ? "experts: attention, norms and KV on the GPU, each layer's feed-forward on the CPU "
                                                 "(hidden state down and back up); "
                                               : "experts: attention and norms on the GPU, the KV cache in DRAM, each layer's "
                                                 "feed-forward on the CPU (hidden state down and back up); ";
    if (!e.enabled) return where + "every routed expert resident in DRAM" + device_part(e) + op_offload_part(e);
    return where + fmt::format("DRAM cache of {} ({} each), expected hit rate {:.1f}%; a token reads {} of weights, {} of "
                               "them from NVMe; routing {}",
                               e.cache_slots, format_size(static_cast<double>(e.slot_bytes)), 100 * e.hit_rate,
                               format_size(e.active_bytes_per_token), format_size(e.nvme_bytes_per_token), e.routing) +
           device_part(e) + op_offload_part(e);
}

std::string format_expert_plan(const ExpertPlan& e, const ModelShape& shape) {
    std::string s = expert_line(e) + "\n";
    s += fmt::format("{:<11} {:<34} {}\n", "layers", "routed experts", "on the device, then in DRAM (most chosen first)");
    auto ids = [](const std::vector<int32_t>& v) {
        std::string out;
        for (size_t i = 0; i < v.size() && i < 12; ++i) out += (i ? "," : "") + std::to_string(v[i]);
        return v.size() > 12 ? out + fmt::format(",... ({} more)", v.size() - 12) : out;
    };
    const size_t L = static_cast<size_t>(shape.n_layer);
    auto on_device = [&](size_t il) { return il < e.device.size() ? e.device[il] : std::vector<int32_t>{}; };
    auto in_dram = [&](size_t il) { return il < e.dram.size() ? e.dram[il] : std::vector<int32_t>{}; };
    for (size_t il = 0; il < L;) {
        size_t j = il + 1;
        while (j < L && on_device(j) == on_device(il) && in_dram(j) == in_dram(il)) ++j;
        const std::string range = j - il == 1 ? std::to_string(il) : fmt::format("{}-{}", il, j - 1);
        const size_t n_dev = on_device(il).size(), n_dram = e.enabled ? in_dram(il).size() : shape.n_expert - n_dev;
        const size_t n_nvme = shape.n_expert - n_dev - n_dram;
        std::string where = fmt::format("{} dram, {} nvme", n_dram, n_nvme);
        if (e.has_device()) where = fmt::format("{} device, ", n_dev) + where;
        std::string which = n_dev ? "device " + ids(on_device(il)) : "";
        if (e.enabled) which += (which.empty() ? "" : "; ") + std::string("dram ") + ids(in_dram(il));
        s += fmt::format("{:<11} {:<34} {}\n", range, where, which);
        il = j;
    }
    return s;
}

json expert_plan_json(const ExpertPlan& e) {
    return {{"enabled", e.enabled},
            {"n_expert", e.n_expert},
            {"routing", e.routing},
            {"cache_slots", e.cache_slots},
            {"slot_bytes", e.slot_bytes},
            {"hit_rate", e.hit_rate},
            {"active_bytes_per_token", e.active_bytes_per_token},
            {"nvme_bytes_per_token", e.nvme_bytes_per_token},
            {"dram", e.dram},
            {"attention_on_gpu", e.attention_on_gpu},
            {"kv_on_gpu", e.kv_on_gpu},
            {"device", e.device},
            {"device_share", e.device_share},
            {"device_bytes_per_token", e.device_bytes_per_token},
            {"op_offload_rows", e.op_offload_rows}};
}

ExpertPlan expert_plan_from_json(const json& j) {
    constexpr std::string_view path = "plan.experts";
    ExpertPlan e;
    e.enabled = get<bool>(j, path, "enabled");
    e.routing = get<std::string>(j, path, "routing");
    e.cache_slots = get<int32_t>(j, path, "cache_slots");
    e.slot_bytes = get<uint64_t>(j, path, "slot_bytes");
    e.hit_rate = get<double>(j, path, "hit_rate");
    e.active_bytes_per_token = get<double>(j, path, "active_bytes_per_token");
    e.nvme_bytes_per_token = get<double>(j, path, "nvme_bytes_per_token");
    e.dram = get<std::vector<std::vector<int32_t>>>(j, path, "dram");
    // Absent in plans saved before them.
    e.n_expert = j.value("n_expert", 0);
    e.attention_on_gpu = j.value("attention_on_gpu", false);
    e.kv_on_gpu = j.value("kv_on_gpu", true);
    e.device = j.value("device", std::vector<std::vector<int32_t>>{});
    e.device_share = j.value("device_share", std::vector<double>{});
    e.device_bytes_per_token = j.value("device_bytes_per_token", 0.0);
    e.op_offload_rows = j.value("op_offload_rows", 0);
    if (e.op_offload_rows < 0)
        throw UsageError(fmt::format("{}: op_offload_rows {} is negative", path, e.op_offload_rows),
                         "give 0 (no op offload) or the prompt rows from which it runs, as strata plan writes it");
    if (e.device.size() != e.device_share.size())
        throw UsageError(fmt::format("{}: {} layers of device experts but {} device shares", path, e.device.size(),
                                     e.device_share.size()));
    if (e.cache_slots < 0 || e.hit_rate < 0 || e.hit_rate > 1)
        throw UsageError(fmt::format("{}: cache_slots {} or hit_rate {} out of range", path, e.cache_slots, e.hit_rate));
    return e;
}

}  // namespace strata::planner
