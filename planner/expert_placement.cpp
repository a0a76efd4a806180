#include "planner/expert_placement.h"

#include <algorithm>
#include <filesystem>
#include <numeric>

#include "planner/json_util.h"
#include "planner/units.h"

namespace strata::planner {

using json_util::get;
using json_util::json;

uint64_t expert_bytes(const ModelShape& s) {
    uint64_t most = 0;
    for (const LayerShape& l : s.layers) most = std::max(most, s.n_expert ? l.expert_bytes / s.n_expert : 0);
    return most;
}

ExpertPlan place_experts(const ModelShape& s, const RoutingProfile* routing, const std::string& routing_note,
                         int32_t cache_slots, uint64_t slot_bytes, const std::vector<bool>& offloaded) {
    auto is_offloaded = [&](int il) { return offloaded.empty() || offloaded[static_cast<size_t>(il)]; };
    ExpertPlan x;
    x.enabled = true;
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
    int n_offloaded = 0;
    for (int il = 0; il < L; ++il) {
        if (!is_offloaded(il)) continue;
        ++n_offloaded;
        uint64_t total = 0;
        if (routing) total = std::accumulate(routing->counts[il].begin(), routing->counts[il].end(), uint64_t{0});
        for (int e = 0; e < N; ++e)
            all.push_back({total ? K * double(routing->counts[il][e]) / double(total) : K / N, il, e});
    }
    // The most chosen first; ties spread over the layers (expert index, then layer).
    std::stable_sort(all.begin(), all.end(), [](const Choice& a, const Choice& b) {
        return a.p > b.p || (a.p == b.p && (a.expert < b.expert || (a.expert == b.expert && a.layer < b.layer)));
    });
    x.dram.assign(static_cast<size_t>(L), {});
    double held = 0;
    for (size_t i = 0; i < all.size() && i < static_cast<size_t>(std::max(0, cache_slots)); ++i) {
        held += all[i].p;
        x.dram[all[i].layer].push_back(all[i].expert);
    }
    x.hit_rate = n_offloaded && K ? held / (n_offloaded * K) : 1;
    // A cache of this size seen before: its decode hit rate counts the routing's locality from
    // token to token, which the counts above cannot.
    const double share = n_offloaded && N ? double(std::max(0, cache_slots)) / (double(n_offloaded) * N) : 1;
    if (const auto seen = routing ? routing->observed_hit_rate(share) : std::nullopt; seen && n_offloaded) {
        x.hit_rate = *seen;
        x.routing += fmt::format("; hit rate observed at a cache of {:.1f}% of the experts", 100 * share);
    }
    double active = static_cast<double>(s.output_bytes), experts = 0, offloaded_experts = 0;
    for (int il = 0; il < L; ++il) {
        const LayerShape& l = s.layers[static_cast<size_t>(il)];
        active += static_cast<double>(l.weight_bytes - l.expert_bytes);
        const double chosen = N ? static_cast<double>(l.expert_bytes) * K / N : 0;
        experts += chosen;
        if (is_offloaded(il)) offloaded_experts += chosen;
    }
    x.active_bytes_per_token = active + experts;
    x.nvme_bytes_per_token = offloaded_experts * (1 - x.hit_rate);
    return x;
}

int32_t expert_slots_for(const ModelShape& s, const Workload& wl, DType kv_type, double dram, uint64_t slot_bytes) {
    double fixed = static_cast<double>(s.output_bytes + s.embd_bytes + s.other_bytes);
    for (const LayerShape& l : s.layers) fixed += static_cast<double>(l.weight_bytes - l.expert_bytes);
    ModelShape kv = s;
    kv.kv_type = kv_type;
    const double ctx = double(wl.prompt_len) + wl.gen_len;
    fixed += s.n_layer * wl.batch * ctx * kv.kv_bytes_per_token();
    // The prefill working set, as CostModel::fixed counts it.
    fixed += wl.batch * wl.prompt_len * (4.0 * s.n_embd + 3.0 * s.n_ff) * 2.0 + wl.batch * s.n_vocab * 4.0;
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
    if (hw.has_gpu()) {
        std::optional<Plan> on_gpu = attention_on_gpu_if_fits(p, s, hw);
        if (!on_gpu) return std::nullopt;
        p = std::move(*on_gpu);
    }
    if (best && best->prediction.objective_s <= p.prediction.objective_s) return std::nullopt;
    return p;
}

SearchResult search_with_expert_offload(const ModelShape& s, const HardwareProfile& hw, const Workload& wl,
                                        const PlannerOptions& opts) {
    SearchResult r;
    std::optional<OutOfBudget> no_fit;
    try {
        r = search_plans(s, hw, wl, opts);
    } catch (const OutOfBudget& e) {
        if (s.n_expert == 0) throw;
        no_fit = e;
    }
    if (s.n_expert == 0) return r;
    std::string note = "no model file to keep routing statistics beside";
    std::optional<RoutingProfile> routing;
    std::error_code ec;
    if (s.source != "catalog" && std::filesystem::is_regular_file(s.source, ec))
        routing = load_routing_profile(s.source, std::filesystem::file_size(s.source), s.n_layer, s.n_expert, &note);
    if (auto p = offload_if_better(s, hw, wl, opts.budgets, opts.kv_types.front(), routing ? &*routing : nullptr, note,
                                   no_fit ? nullptr : &r.best))
        r.best = std::move(*p);
    else if (no_fit)
        throw *no_fit;
    return r;
}

std::string expert_line(const ExpertPlan& e) {
    const std::string where = e.attention_on_gpu
        ? "experts: attention, norms and KV on the GPU, each layer's feed-forward on the CPU (hidden state down and back up); "
        : "experts: ";
    if (!e.enabled) return where + "every routed expert resident in DRAM";
    return where + fmt::format("DRAM cache of {} ({} each), expected hit rate {:.1f}%; a token reads {} of weights, {} of "
                               "them from NVMe; routing {}",
                               e.cache_slots, format_size(static_cast<double>(e.slot_bytes)), 100 * e.hit_rate,
                               format_size(e.active_bytes_per_token), format_size(e.nvme_bytes_per_token), e.routing);
}

std::string format_expert_plan(const ExpertPlan& e, const ModelShape& shape) {
    std::string s = expert_line(e) + "\n";
    s += fmt::format("{:<11} {:<24} {}\n", "layers", "routed experts", "in DRAM (most chosen first)");
    auto ids = [](const std::vector<int32_t>& v) {
        std::string out;
        for (size_t i = 0; i < v.size() && i < 12; ++i) out += (i ? "," : "") + std::to_string(v[i]);
        return v.size() > 12 ? out + fmt::format(",... ({} more)", v.size() - 12) : out;
    };
    for (size_t il = 0; il < e.dram.size();) {
        size_t j = il + 1;
        while (j < e.dram.size() && e.dram[j] == e.dram[il]) ++j;
        const std::string range = j - il == 1 ? std::to_string(il) : fmt::format("{}-{}", il, j - 1);
        const size_t n = e.dram[il].size();
        s += fmt::format("{:<11} {:<24} {}\n", range, fmt::format("{} dram, {} nvme", n, shape.n_expert - static_cast<int>(n)),
                         ids(e.dram[il]));
        il = j;
    }
    return s;
}

json expert_plan_json(const ExpertPlan& e) {
    return {{"enabled", e.enabled},
            {"routing", e.routing},
            {"cache_slots", e.cache_slots},
            {"slot_bytes", e.slot_bytes},
            {"hit_rate", e.hit_rate},
            {"active_bytes_per_token", e.active_bytes_per_token},
            {"nvme_bytes_per_token", e.nvme_bytes_per_token},
            {"dram", e.dram},
            {"attention_on_gpu", e.attention_on_gpu}};
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
    e.attention_on_gpu = j.value("attention_on_gpu", false);  // absent in plans saved before it
    if (e.cache_slots < 0 || e.hit_rate < 0 || e.hit_rate > 1)
        throw UsageError(fmt::format("{}: cache_slots {} or hit_rate {} out of range", path, e.cache_slots, e.hit_rate));
    return e;
}

}  // namespace strata::planner
