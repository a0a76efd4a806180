#include "planner/plan.h"

#include <cmath>

#include "planner/expert_placement.h"
#include "planner/json_util.h"
#include "planner/model_shape.h"

namespace strata::planner {

using json_util::get;
using json_util::get_or;
using json_util::json;

namespace {
constexpr std::array<std::string_view, kNumWeightOptions> kWeightNames = {"gpu", "dram->gpu", "dram(cpu)", "nvme->gpu", "nvme(cpu)"};
constexpr std::array<std::string_view, kNumKvOptions> kKvNames = {"gpu", "dram", "nvme", "act:gpu", "act:dram", "act:nvme"};
constexpr std::array<std::string_view, kNumStreams> kStreamNames = {"gpu compute", "cpu compute", "pcie h2d", "pcie d2h", "nvme", "dram"};
constexpr std::array<std::string_view, kNumHiddenOptions> kHiddenNames = {"gpu", "dram"};

template <class E, size_t N>
E enum_from(const std::array<std::string_view, N>& names, const std::string& s, std::string_view what) {
    for (size_t i = 0; i < N; ++i)
        if (names[i] == s) return static_cast<E>(i);
    std::string known;
    for (auto n : names) known += (known.empty() ? "" : ", ") + std::string(n);
    throw UsageError(fmt::format("plan: {} '{}' is not one of {}", what, s, known));
}

json phase_json(const PhaseTimes& p) {
    json streams = json::object();
    for (int i = 0; i < kNumStreams; ++i) streams[std::string(kStreamNames[i])] = p.stream_s[i];
    return {{"time_s", p.time_s}, {"overhead_s", p.overhead_s}, {"bottleneck", stream_name(p.bottleneck)}, {"streams_s", streams}};
}

PhaseTimes phase_from(const json& j, std::string_view path) {
    PhaseTimes p;
    p.time_s = get<double>(j, path, "time_s");
    p.overhead_s = get<double>(j, path, "overhead_s");
    p.bottleneck = enum_from<Stream>(kStreamNames, get<std::string>(j, path, "bottleneck"), "bottleneck");
    const json& s = json_util::object(j, path, "streams_s");
    for (int i = 0; i < kNumStreams; ++i) p.stream_s[i] = get<double>(s, path, std::string(kStreamNames[i]).c_str());
    return p;
}

DType dtype_field(const json& j, std::string_view path, const char* key) {
    const auto s = get<std::string>(j, path, key);
    const auto t = dtype_from_name(s);
    if (!t) throw UsageError(fmt::format("{}: type '{}' is unknown", path, s));
    return *t;
}
}  // namespace

Tier tier_of(WeightOption o) {
    switch (o) {
        case WeightOption::Gpu: return Tier::Gpu;
        case WeightOption::DramToGpu:
        case WeightOption::DramCpu: return Tier::Dram;
        default: return Tier::Nvme;
    }
}
Device device_of(WeightOption o) {
    return o == WeightOption::DramCpu || o == WeightOption::NvmeCpu ? Device::Cpu : Device::Gpu;
}
Tier tier_of(KvOption o) {
    switch (o) {
        case KvOption::Gpu:
        case KvOption::ActGpu: return Tier::Gpu;
        case KvOption::Dram:
        case KvOption::ActDram: return Tier::Dram;
        default: return Tier::Nvme;
    }
}
bool is_recompute(KvOption o) { return o == KvOption::ActGpu || o == KvOption::ActDram || o == KvOption::ActNvme; }
std::string_view tier_name(Tier t) { return t == Tier::Gpu ? "gpu" : t == Tier::Dram ? "dram" : "nvme"; }
std::string_view device_name(Device d) { return d == Device::Gpu ? "gpu" : "cpu"; }
std::string_view option_name(WeightOption o) { return kWeightNames[static_cast<size_t>(o)]; }
std::string_view option_name(KvOption o) { return kKvNames[static_cast<size_t>(o)]; }
std::string_view stream_name(Stream s) { return kStreamNames[static_cast<size_t>(s)]; }

std::string Plan::to_json() const {
    json layers_j = json::array();
    for (const auto& l : layers)
        layers_j.push_back({{"layer", l.layer}, {"weights", option_name(l.weights)}, {"kv", option_name(l.kv)},
                            {"attention", device_name(l.attention)}});
    json groups = json::array();
    for (const auto& g : lp_groups) {
        json w = json::object(), k = json::object();
        for (int i = 0; i < kNumWeightOptions; ++i) w[std::string(kWeightNames[i])] = g.weights[i];
        for (int i = 0; i < kNumKvOptions; ++i) k[std::string(kKvNames[i])] = g.kv[i];
        groups.push_back({{"first_layer", g.first_layer}, {"n_layers", g.n_layers}, {"weights", w}, {"kv", k}});
    }
    const Prediction& p = prediction;
    json j = {
        {"strata_plan", 1},
        {"model", {{"name", model_name}, {"n_layer", n_layer}, {"weight_bytes", model_weight_bytes}, {"weight_type", dtype_name(weight_type)}}},
        {"hardware", hardware},
        {"budgets", {{"gpu", budgets.gpu}, {"dram", budgets.dram}, {"nvme", budgets.nvme}}},
        {"workload", {{"prompt_len", workload.prompt_len}, {"gen_len", workload.gen_len}, {"batch", workload.batch},
                      {"kv_len", workload.kv_len}, {"objective", objective_name(workload.objective)}}},
        {"policy", {{"batch", policy.batch}, {"n_micro", policy.n_micro}, {"cpu_attention", policy.cpu_attention},
                    {"recompute", policy.recompute}, {"kv_type", dtype_name(policy.kv_type)}}},
        {"has_gpu", has_gpu},
        {"output", option_name(output)},
        {"embedding", option_name(embedding)},
        {"hidden", kHiddenNames[static_cast<size_t>(hidden)]},
        {"layers", layers_j},
        {"prediction", {{"prefill", phase_json(p.prefill)}, {"decode", phase_json(p.decode)}, {"ttft_s", p.ttft_s},
                        {"decode_tps_per_seq", p.decode_tps_per_seq}, {"decode_tps_aggregate", p.decode_tps_aggregate},
                        {"throughput_tps", p.throughput_tps}, {"total_s", p.total_s}, {"objective_s", p.objective_s},
                        {"memory_bytes", {{"gpu", p.used.gpu}, {"dram", p.used.dram}, {"nvme", p.used.nvme}}}}},
        {"lp", {{"bound_s", lp_bound_s}, {"objective_s", lp_objective_s}, {"rounding_loss", rounding_loss}, {"groups", groups}}},
    };
    if (experts.enabled || experts.attention_on_gpu) j["experts"] = expert_plan_json(experts);
    return j.dump(2);
}

Plan Plan::from_json(std::string_view text) {
    const json j = json_util::parse(text, "plan");
    const int version = j.is_object() ? get_or<int>(j, "plan", "strata_plan", 0) : 0;
    if (version == 0) throw UsageError("the file is not a Strata plan (no 'strata_plan': 1)", "make one with `strata plan --json`");
    if (version != 1)
        throw UsageError(fmt::format("the plan's format is version {}, and this Strata reads version 1", version),
                         "make the plan again with this Strata: `strata plan -m MODEL -o FILE`");
    Plan p;
    const json& m = json_util::object(j, "plan", "model");
    p.model_name = get<std::string>(m, "plan.model", "name");
    p.n_layer = get<int32_t>(m, "plan.model", "n_layer");
    p.model_weight_bytes = get<uint64_t>(m, "plan.model", "weight_bytes");
    p.weight_type = dtype_field(m, "plan.model", "weight_type");
    p.hardware = get_or<std::string>(j, "plan", "hardware", "");
    const json& b = json_util::object(j, "plan", "budgets");
    p.budgets = {get<double>(b, "plan.budgets", "gpu"), get<double>(b, "plan.budgets", "dram"), get<double>(b, "plan.budgets", "nvme")};
    const json& w = json_util::object(j, "plan", "workload");
    p.workload.prompt_len = get<int32_t>(w, "plan.workload", "prompt_len");
    p.workload.gen_len = get<int32_t>(w, "plan.workload", "gen_len");
    p.workload.batch = get<int32_t>(w, "plan.workload", "batch");
    p.workload.kv_len = get_or<int32_t>(w, "plan.workload", "kv_len", 0);
    const auto obj = objective_from_name(get<std::string>(w, "plan.workload", "objective"));
    if (!obj) throw UsageError("plan.workload: objective must be latency or throughput");
    p.workload.objective = *obj;
    p.workload.validate();
    const json& pol = json_util::object(j, "plan", "policy");
    p.policy.batch = get<int32_t>(pol, "plan.policy", "batch");
    p.policy.n_micro = get<int32_t>(pol, "plan.policy", "n_micro");
    p.policy.cpu_attention = get<bool>(pol, "plan.policy", "cpu_attention");
    p.policy.recompute = get<bool>(pol, "plan.policy", "recompute");
    p.policy.kv_type = dtype_field(pol, "plan.policy", "kv_type");
    if (p.policy.batch <= 0 || p.policy.n_micro <= 0 || p.policy.batch % p.policy.n_micro != 0)
        throw UsageError(fmt::format("plan.policy: batch {} is not a positive multiple of n_micro {}", p.policy.batch, p.policy.n_micro));
    p.has_gpu = get<bool>(j, "plan", "has_gpu");
    p.output = enum_from<WeightOption>(kWeightNames, get<std::string>(j, "plan", "output"), "output placement");
    p.embedding = enum_from<WeightOption>(kWeightNames, get<std::string>(j, "plan", "embedding"), "embedding placement");
    p.hidden = enum_from<HiddenOption>(kHiddenNames, get<std::string>(j, "plan", "hidden"), "hidden placement");
    if (!j.contains("layers") || !j.at("layers").is_array()) throw UsageError("plan: missing array 'layers'");
    for (const auto& l : j.at("layers")) {
        LayerPlacement lp;
        lp.layer = get<int32_t>(l, "plan.layers[]", "layer");
        lp.weights = enum_from<WeightOption>(kWeightNames, get<std::string>(l, "plan.layers[]", "weights"), "weight placement");
        lp.kv = enum_from<KvOption>(kKvNames, get<std::string>(l, "plan.layers[]", "kv"), "KV placement");
        const auto dev = get<std::string>(l, "plan.layers[]", "attention");
        if (dev != "gpu" && dev != "cpu") throw UsageError(fmt::format("plan.layers[{}]: attention '{}' is not gpu or cpu", lp.layer, dev));
        lp.attention = dev == "gpu" ? Device::Gpu : Device::Cpu;
        if (lp.layer != static_cast<int32_t>(p.layers.size()))
            throw UsageError(fmt::format("plan.layers: entry {} is for layer {}; layers must be listed 0, 1, 2, ...", p.layers.size(), lp.layer));
        if (!p.has_gpu && (device_of(lp.weights) == Device::Gpu || tier_of(lp.kv) == Tier::Gpu || lp.attention == Device::Gpu))
            throw UsageError(fmt::format("plan.layers[{}] uses the GPU but the plan has none", lp.layer));
        if (is_recompute(lp.kv) && !p.policy.recompute)
            throw UsageError(fmt::format("plan.layers[{}] recomputes KV but the policy has recompute off", lp.layer));
        p.layers.push_back(lp);
    }
    if (static_cast<int32_t>(p.layers.size()) != p.n_layer)
        throw UsageError(fmt::format("plan: {} layer placements for a {}-layer model", p.layers.size(), p.n_layer));

    if (j.contains("experts")) {
        p.experts = expert_plan_from_json(j.at("experts"));
        if (p.experts.enabled && p.experts.dram.size() != p.layers.size())
            throw UsageError(fmt::format("plan.experts: {} layers of experts for a {}-layer model", p.experts.dram.size(), p.n_layer));
        if (p.experts.has_device() && p.experts.device.size() != p.layers.size())
            throw UsageError(fmt::format("plan.experts.device: {} layers of experts for a {}-layer model",
                                         p.experts.device.size(), p.n_layer));
    }
    const json& pr = json_util::object(j, "plan", "prediction");
    Prediction& q = p.prediction;
    q.prefill = phase_from(json_util::object(pr, "plan.prediction", "prefill"), "plan.prediction.prefill");
    q.decode = phase_from(json_util::object(pr, "plan.prediction", "decode"), "plan.prediction.decode");
    q.ttft_s = get<double>(pr, "plan.prediction", "ttft_s");
    q.decode_tps_per_seq = get<double>(pr, "plan.prediction", "decode_tps_per_seq");
    q.decode_tps_aggregate = get<double>(pr, "plan.prediction", "decode_tps_aggregate");
    q.throughput_tps = get<double>(pr, "plan.prediction", "throughput_tps");
    q.total_s = get<double>(pr, "plan.prediction", "total_s");
    q.objective_s = get<double>(pr, "plan.prediction", "objective_s");
    const json& mem = json_util::object(pr, "plan.prediction", "memory_bytes");
    q.used = {get<double>(mem, "memory_bytes", "gpu"), get<double>(mem, "memory_bytes", "dram"), get<double>(mem, "memory_bytes", "nvme")};

    const json& lp = json_util::object(j, "plan", "lp");
    p.lp_bound_s = get<double>(lp, "plan.lp", "bound_s");
    p.lp_objective_s = get<double>(lp, "plan.lp", "objective_s");
    p.rounding_loss = get<double>(lp, "plan.lp", "rounding_loss");
    for (const auto& g : lp.value("groups", json::array())) {
        GroupSolution gs;
        gs.first_layer = get<int32_t>(g, "plan.lp.groups[]", "first_layer");
        gs.n_layers = get<int32_t>(g, "plan.lp.groups[]", "n_layers");
        const json& w2 = json_util::object(g, "plan.lp.groups[]", "weights");
        const json& k2 = json_util::object(g, "plan.lp.groups[]", "kv");
        for (int i = 0; i < kNumWeightOptions; ++i) gs.weights[i] = get<double>(w2, "groups[].weights", std::string(kWeightNames[i]).c_str());
        for (int i = 0; i < kNumKvOptions; ++i) gs.kv[i] = get<double>(k2, "groups[].kv", std::string(kKvNames[i]).c_str());
        p.lp_groups.push_back(gs);
    }
    return p;
}

void Plan::check_matches(const ModelShape& shape) const {
    if (shape.n_layer != n_layer || shape.total_weight_bytes() != model_weight_bytes)
        throw UsageError(fmt::format("the plan was made for '{}' ({} layers, {} weight bytes), not for '{}' ({} layers, {} weight bytes)",
                                     model_name, n_layer, model_weight_bytes, shape.name, shape.n_layer, shape.total_weight_bytes()),
                         "make a new plan for this model with `strata plan`");
}

}  // namespace strata::planner
