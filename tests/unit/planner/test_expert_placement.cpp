// Expert offload in the planner: the expected cache content and hit rate from routing
// statistics (or uniform routing), the pricing of offloaded layers (with their attention on a
// GPU too) and the plan's JSON.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <initializer_list>

#include <nlohmann/json.hpp>

#include "core/error.h"

#include "planner/cost_model.h"
#include "planner/expert_placement.h"
#include "planner/plan_report.h"
#include "planner/policy_search.h"
#include "planner/routing_profile.h"
#include "tests/support/toy_hardware.h"

using namespace strata;
using namespace strata::planner;
using strata::test::toy_cpu;

namespace {

// 2 layers of 4 experts (2 chosen per token), each expert 100 MB; 10 MB of other weights per layer.
ModelShape moe_shape() {
    ModelShape s;
    s.name = "toy-moe";
    s.family = "qwen3moe";
    s.n_layer = 2, s.n_embd = 1024, s.n_head = 8, s.n_head_kv = 8, s.head_dim = 128, s.n_ff = 4096, s.n_vocab = 1000;
    s.n_expert = 4, s.n_expert_used = 2;
    LayerShape l;
    l.weight_bytes = 410'000'000, l.expert_bytes = 400'000'000;
    l.n_matmul_params = 410'000'000, l.n_expert_params = 400'000'000;
    s.layers.assign(2, l);
    s.output_bytes = 1'000'000, s.output_matmul_params = 1'000'000;
    s.tied_output = true;
    return s;
}

// 100 tokens' choices: layer 0 chooses expert 3 most, then 2; layer 1 expert 1, then 0.
RoutingProfile skewed_routing() {
    RoutingProfile r;
    r.tokens = 100;
    r.counts = {{10, 20, 70, 100}, {60, 90, 30, 20}};
    return r;
}

}  // namespace

TEST_CASE("expert placement: uniform routing expects the cache's share of the experts", "[unit][planner][experts]") {
    const ModelShape s = moe_shape();
    const ExpertPlan x = place_experts(s, nullptr, "none saved", 3, 100'000'000);
    CHECK(x.enabled);
    CHECK(x.routing == "uniform (none saved)");
    // 3 of the 8 (layer, expert) pairs: each is chosen with probability 2/4.
    CHECK(x.hit_rate == Approx(3.0 / 8));
    // Ties spread over the layers: expert 0 of both layers, then expert 1 of layer 0.
    CHECK(x.dram == std::vector<std::vector<int32_t>>{{0, 1}, {0}});
    // A token reads every other weight and 2 experts per layer; the misses come from NVMe.
    CHECK(x.active_bytes_per_token == Approx(1e6 + 2 * (10e6 + 200e6)));
    CHECK(x.nvme_bytes_per_token == Approx(2 * 200e6 * (1 - 3.0 / 8)));
}

TEST_CASE("expert placement: measured routing keeps the most chosen experts", "[unit][planner][experts]") {
    const ModelShape s = moe_shape();
    RoutingProfile r;
    r.tokens = 100;
    r.counts = {{90, 10, 60, 40}, {5, 5, 95, 95}};  // 200 choices per layer
    r.path = "/models/m.routing.json";
    const ExpertPlan x = place_experts(s, &r, "", 3, 100'000'000);
    CHECK(x.routing == "measured: /models/m.routing.json (100 tokens)");
    // Layer 1's experts 2 and 3 (0.95 each) and layer 0's expert 0 (0.9).
    CHECK(x.dram == std::vector<std::vector<int32_t>>{{0}, {2, 3}});
    CHECK(x.hit_rate == Approx((0.9 + 0.95 + 0.95) / 4));
    // A layer kept whole is not in the cache's count.
    const ExpertPlan only1 = place_experts(s, &r, "", 2, 100'000'000, {false, true});
    CHECK(only1.dram == std::vector<std::vector<int32_t>>{{}, {2, 3}});
    CHECK(only1.hit_rate == Approx(0.95));
}

TEST_CASE("expert placement: a cache size seen before gives its observed hit rate", "[unit][planner][experts]") {
    const ModelShape s = moe_shape();
    RoutingProfile r;
    r.tokens = 100;
    r.counts = {{50, 50, 50, 50}, {50, 50, 50, 50}};
    r.path = "/models/m.routing.json";
    r.observe({0.375, 70, 100});  // 3 slots of 8 experts hit 70%: locality uniform counts cannot show
    const ExpertPlan x = place_experts(s, &r, "", 3, 100'000'000);
    CHECK(x.hit_rate == Approx(0.7));
    CHECK_THAT(x.routing, Catch::Contains("hit rate observed at a cache of 37.5% of the experts"));
    CHECK(x.nvme_bytes_per_token == Approx(2 * 200e6 * 0.3));
    // Half the experts: between the observation and a cache holding every expert.
    CHECK(place_experts(s, &r, "", 4, 100'000'000).hit_rate == Approx(0.7 + 0.3 * (0.5 - 0.375) / 0.625));
}

TEST_CASE("expert placement: offloaded layers are priced from active bytes and the misses", "[unit][planner][experts]") {
    const ModelShape s = moe_shape();
    const HardwareProfile hw = toy_cpu();
    const Workload wl{8, 4, 1, Objective::Latency};
    constexpr int N = static_cast<int>(Stream::Nvme), C = static_cast<int>(Stream::CpuCompute);
    for (double hit : {0.0, 0.5, 1.0}) {
        ExpertPlan x = place_experts(s, nullptr, "", 4, 100'000'000);
        x.hit_rate = hit;
        const Plan p = expert_offload_plan(s, hw, wl, Budgets{0, 1e9, 1e12}, DType::F16, x);
        const CostModel cm(s, hw, wl, p.policy);
        const Cost c = cm.offloaded_layer(0, x);
        INFO("hit rate " << hit);
        // Decode reads 2 of 4 experts (200 MB); the misses cross a 2 GB/s disk.
        CHECK(c.decode[N] == Approx((1 - hit) * 200e6 / 2e9).margin(1e-12));
        // The CPU reads the other weights and the chosen experts once: 210 MB at 10 GB/s; and
        // waits for the misses' reads beyond what computing the held experts (the hit share of
        // 200 MB) covers.
        const double wait = std::max(0.0, (1 - hit) * 200e6 / 2e9 - hit * 200e6 / 10e9);
        CHECK(c.decode[C] == Approx(210e6 / 10e9 + wait));
        // Stored: the experts on NVMe, the other weights and the layer's half of the cache in DRAM.
        CHECK(c.bytes[2] == Approx(400e6));
        CHECK(c.bytes[1] == Approx(10e6 + 2 * 100e6));
        CHECK(p.layers[0].weights == WeightOption::NvmeCpu);
    }
}

TEST_CASE("expert placement: a plan with offloaded experts round-trips through JSON", "[unit][planner][experts]") {
    const ModelShape s = moe_shape();
    const Plan p = expert_offload_plan(s, toy_cpu(), Workload{8, 4, 1, Objective::Latency}, Budgets{0, 1e9, 1e12},
                                       DType::F16, place_experts(s, nullptr, "none", 3, 100'000'000), {true, false});
    CHECK(p.layers[1].weights == WeightOption::DramCpu);
    const Plan back = Plan::from_json(p.to_json());
    CHECK(back == p);
    auto broken = nlohmann::json::parse(p.to_json());
    broken["experts"]["hit_rate"] = 1.5;
    CHECK_THROWS_WITH(Plan::from_json(broken.dump()), Catch::Contains("hit_rate"));
}


TEST_CASE("expert placement: offload plans a budget too small to stream whole layers", "[unit][planner][experts]") {
    const ModelShape s = moe_shape();
    const HardwareProfile hw = toy_cpu();
    const Workload wl{8, 4, 1, Objective::Latency};
    PlannerOptions opts;
    opts.budgets = {0, 600e6, 1e12};
    // 600 MB cannot stage two 410 MB layers read from NVMe...
    CHECK_THROWS_AS(search_plans(s, hw, wl, opts), OutOfBudget);
    // ...but holds the layers' other weights and 5 of the 8 experts: a token reads 3/8 of its
    // 2 x 200 MB of chosen experts from the 2 GB/s disk.
    const auto off = offload_if_better(s, hw, wl, opts.budgets, DType::F16, nullptr, "none", nullptr);
    REQUIRE(off);
    CHECK(off->experts.cache_slots == 5);
    CHECK(off->prediction.decode.stream_s[static_cast<int>(Stream::Nvme)] == Approx(2 * 200e6 * 3 / 8 / 2e9));
    // strata plan's search falls back on it, saying which routing it assumed.
    const SearchResult r = search_with_expert_offload(s, hw, wl, opts);
    CHECK(r.best.experts.enabled);
    CHECK_THAT(r.best.experts.routing, Catch::StartsWith("uniform"));
    // Too little for one layer's 4 experts: no plan.
    CHECK_FALSE(offload_if_better(s, hw, wl, Budgets{0, 300e6, 1e12}, DType::F16, nullptr, "none", nullptr));
}

TEST_CASE("expert placement: the expert cache's slots leave room for the KV cache of the whole context", "[unit][planner][experts]") {
    const ModelShape s = moe_shape();  // F16 KV: 2 layers x 2 x 8 heads x 128 x 2 bytes = 8 KiB a position
    // 600 MB less the head, the layers' resident parts, 304 positions' KV and a pass's activations
    // (about 32 MB in all) hold 5 experts of 100 MB.
    Workload short_prompt{300, 4, 1, Objective::Latency};
    CHECK(expert_slots_for(s, short_prompt, DType::F16, 600e6, 100'000'000) == 5);
    // A runtime planning that prompt in a context of 30,000 positions holds their KV (246 MB)
    // whatever the prompt: 3 slots, as for a prompt that fills the context.
    Workload in_context = short_prompt;
    in_context.kv_len = 30'000;
    CHECK(expert_slots_for(s, in_context, DType::F16, 600e6, 100'000'000) == 3);
    CHECK(expert_slots_for(s, Workload{29'996, 4, 1, Objective::Latency}, DType::F16, 600e6, 100'000'000) == 3);
}

namespace {
// toy_cpu with a GPU of round numbers: 100 GB/s, 10 TFLOPS, 10 GB/s each way, no launch cost.
HardwareProfile toy_with_gpu(uint64_t memory) {
    HardwareProfile hw = toy_cpu();
    GpuProfile g;
    g.name = "toy gpu";
    g.memory_bytes = memory;
    g.mem_gbps = 100, g.fp16_tflops = 10, g.h2d_gbps = g.d2h_gbps = 10, g.launch_overhead_us = 0;
    hw.gpu = g;
    return hw;
}
}  // namespace

TEST_CASE("expert placement: attention on the GPU, the feed-forward on the CPU, priced with the hop between",
          "[unit][planner][experts]") {
    const ModelShape s = moe_shape();
    const HardwareProfile hw = toy_with_gpu(1'000'000'000);
    const Workload wl{8, 4, 1, Objective::Latency};
    ExpertPlan x = place_experts(s, nullptr, "", 4, 100'000'000);
    x.hit_rate = 0.5;
    const Plan p = with_attention_on_gpu(expert_offload_plan(s, hw, wl, Budgets{1e9, 1e9, 1e12}, DType::F16, x), s, hw, true);
    CHECK(p.experts.attention_on_gpu);
    CHECK(p.has_gpu);
    for (const LayerPlacement& l : p.layers) {
        CHECK(l.weights == WeightOption::NvmeCpu);
        CHECK(l.kv == KvOption::Gpu);
        CHECK(l.attention == Device::Gpu);
    }
    const CostModel cm(s, hw, wl, p.policy);
    const Cost c = cm.hybrid_layer(0, p.experts, true);
    constexpr int G = static_cast<int>(Stream::GpuCompute), C = static_cast<int>(Stream::CpuCompute),
                  H = static_cast<int>(Stream::PcieH2D), D = static_cast<int>(Stream::PcieD2H), N = static_cast<int>(Stream::Nvme);
    // q, k, v and o: 1024 x (8 + 8 + 8 + 8) x 128 parameters of the layer's 10 MB of 10 M dense ones.
    const double attn = 10e6 * (1024.0 * 4 * 8 * 128) / 10e6;
    CHECK(c.decode[G] == Approx(attn / 100e9));                       // read once at 100 GB/s
    CHECK(c.decode[D] == Approx(1024 * 4 / 10e9));                    // one token's hidden state down...
    CHECK(c.decode[H] == Approx(1024 * 4 / 10e9));                    // ...and back up
    // The rest and 2 of 4 experts at 10 GB/s, and the wait for the misses' reads beyond the
    // held half of that compute.
    const double ffn = (10e6 - attn + 200e6) / 10e9;
    CHECK(c.decode[C] == Approx(ffn + std::max(0.0, 0.5 * 200e6 / 2e9 - 0.5 * ffn)));
    CHECK(c.decode[N] == Approx(0.5 * 200e6 / 2e9).margin(1e-12));    // half the chosen experts from the disk
    // The KV cache in DRAM: the CPU attends, but to latent attention, which the GPU attends over
    // the rows copied up (the device runtime has no CPU attention for it).
    ModelShape latent = s;
    latent.kv_latent = latent.head_dim;
    for (const ModelShape* shape : std::initializer_list<const ModelShape*>{&s, &latent}) {
        const Plan host_kv = with_attention_on_gpu(p, *shape, hw, false);
        const bool cpu_attends = shape->kv_latent == 0;
        CHECK(host_kv.policy.cpu_attention == cpu_attends);
        for (const LayerPlacement& l : host_kv.layers) {
            CHECK(l.kv == KvOption::Dram);
            CHECK(l.attention == (cpu_attends ? Device::Cpu : Device::Gpu));
        }
        CHECK_THAT(expert_line(host_kv.experts), Catch::Contains("attention and norms on the GPU, the KV cache in DRAM"));
    }
    CHECK_THAT(expert_line(p.experts), Catch::Contains("attention, norms and KV on the GPU"));
    CHECK(c.bytes[0] == Approx(attn));
    CHECK(c.bytes[1] == Approx(10e6 - attn + 2 * 100e6));  // the rest and the layer's half of the cache
    CHECK(c.bytes[2] == Approx(400e6));
    // The hybrid plan round-trips through JSON.
    CHECK(Plan::from_json(p.to_json()) == p);
}

TEST_CASE("expert placement: a GPU with room is planned as the device runtime places a mixture of experts",
          "[unit][planner][experts]") {
    // 1.8 GB of DRAM holds the whole model (1.6 GB): a dense plan would hold a layer's weights on
    // the 1 GB GPU, which the device runtime never does for a mixture of experts. The plan is
    // its: the CPU alone's weights, every layer's attention and the KV cache on the GPU, and
    // the most chosen experts in what the GPU has left.
    const ModelShape s = moe_shape();
    const HardwareProfile hw = toy_with_gpu(1'000'000'000);
    const Workload wl{8, 4, 1, Objective::Latency};
    PlannerOptions opts;
    opts.budgets = {1e9, 1.8e9, 1e12};
    const SearchResult r = search_with_expert_offload(s, hw, wl, opts);
    REQUIRE(r.best.has_gpu);
    CHECK(r.best.experts.attention_on_gpu);
    for (const LayerPlacement& l : r.best.layers) {
        CHECK(l.attention == Device::Gpu);
        CHECK(l.kv == KvOption::Gpu);
        CHECK(tier_of(l.weights) == Tier::Dram);
    }
    CHECK(r.best.experts.has_device());
    CHECK(r.best.prediction.used.gpu <= 1e9);
    // The CPU alone's plan under the same DRAM, its weights where this plan keeps them.
    PlannerOptions alone_opts = opts;
    alone_opts.budgets.gpu = 0;
    HardwareProfile alone = hw;
    alone.gpu.reset();
    const Plan cpu = search_with_expert_offload(s, alone, wl, alone_opts).best;
    REQUIRE(cpu.layers.size() == r.best.layers.size());
    for (size_t i = 0; i < cpu.layers.size(); ++i) CHECK(cpu.layers[i].weights == r.best.layers[i].weights);
    // A GPU that cannot hold the attention weights and the head: no plan with it, said so.
    PlannerOptions tiny = opts;
    tiny.budgets.gpu = 1e6;
    CHECK_THROWS_WITH(search_with_expert_offload(s, toy_with_gpu(1'000'000), wl, tiny),
                      Catch::Contains("cannot hold every layer's attention weights, the output head and activations,"));
}

TEST_CASE("expert placement: a GPU too small for the experts gets the attention, the CPU the experts",
          "[unit][planner][experts]") {
    const ModelShape s = moe_shape();
    const HardwareProfile hw = toy_with_gpu(60'000'000);
    const Workload wl{8, 4, 1, Objective::Latency};
    PlannerOptions opts;
    opts.budgets = {60e6, 600e6, 1e12};
    const SearchResult r = search_with_expert_offload(s, hw, wl, opts);
    CHECK(r.best.experts.attention_on_gpu);
    CHECK(r.best.experts.enabled);
    CHECK(r.best.prediction.used.gpu <= 60e6);
    for (const LayerPlacement& l : r.best.layers) {
        CHECK(l.attention == Device::Gpu);
        CHECK(tier_of(l.weights) != Tier::Gpu);
    }
    CHECK_THAT(format_plan(r.best, s, hw, SearchStats{}), Catch::Contains("attention, norms and KV on the GPU"));
}

TEST_CASE("expert placement: with the KV cache in DRAM the GPU keeps room for the layer of it a prompt's pass stages, "
          "as the device runtime does",
          "[unit][planner][experts]") {
    // 100k positions of 4 KiB a layer: 819 MB of KV cache, which with the prompt's hidden states
    // is more than the 1 GB GPU; the GPU keeps one layer's (410 MB) for prompts the device
    // attends to, and holds as many 100 MB experts as the rest has room for.
    const ModelShape s = moe_shape();
    const Workload wl{100'000, 4, 1, Objective::Latency};
    PlannerOptions opts;
    opts.budgets = {1e9, 4e9, 1e12};
    const Plan p = search_with_expert_offload(s, toy_with_gpu(1'000'000'000), wl, opts).best;
    REQUIRE(p.experts.attention_on_gpu);
    CHECK_FALSE(p.experts.kv_on_gpu);
    CHECK(p.policy.cpu_attention);
    const double staging = 100'004.0 * 4096, expert = 100e6;
    INFO("GPU use " << p.prediction.used.gpu << ", experts held " << p.experts.n_device());
    CHECK(p.experts.n_device() > 0);
    CHECK(p.prediction.used.gpu <= 1e9);  // the staged layer counted
    CHECK(p.prediction.used.gpu + expert > 1e9);  // no room for one more
    CHECK(p.prediction.used.gpu - double(p.experts.n_device()) * expert > staging);
    // A GPU that holds the attention but not the staged layer beside it: no plan with it, said so.
    PlannerOptions small = opts;
    small.budgets.gpu = 3e8;
    CHECK_THROWS_WITH(search_with_expert_offload(s, toy_with_gpu(300'000'000), wl, small),
                      Catch::Contains("the layer of the KV cache a prompt's pass stages there"));
}

TEST_CASE("expert placement: the device takes the most chosen experts, the DRAM cache the next", "[unit][planner][experts]") {
    const ModelShape s = moe_shape();
    const RoutingProfile r = skewed_routing();
    DeviceExperts dev;
    dev.slots = 2;
    const ExpertPlan x = place_experts(s, &r, "", 2, 100'000'000, {}, dev);
    CHECK(x.device == std::vector<std::vector<int32_t>>{{3}, {1}});
    CHECK(x.dram == std::vector<std::vector<int32_t>>{{2}, {0}});
    CHECK(x.device_share == std::vector<double>{0.5, 0.45});
    // The cache's hits over the choices the device does not take: (0.35 + 0.3) / (0.5 + 0.55).
    CHECK(x.hit_rate == Approx(0.65 / 1.05));
    CHECK(x.device_bytes_per_token == Approx(200e6 * 0.5 + 200e6 * 0.45));
    CHECK(x.nvme_bytes_per_token == Approx(200e6 * (0.5 + 0.55) * (1 - 0.65 / 1.05)));

    // A layer given whole goes first; a layer kept on the host gives none.
    DeviceExperts forced;
    forced.slots = 1;
    forced.layers = {false, true};
    forced.host_only = {true, false};
    const ExpertPlan y = place_experts(s, &r, "", 2, 100'000'000, {}, forced);
    CHECK(y.device == std::vector<std::vector<int32_t>>{{}, {1, 0, 2, 3}});
    CHECK(y.device_share[1] == Approx(1.0));
    CHECK(y.dram == std::vector<std::vector<int32_t>>{{3, 2}, {}});
    CHECK(y.hit_rate == Approx(1.0 * 0.85 / 1.0));

    // Without offloaded layers the experts are resident; the device still takes the hottest.
    const ExpertPlan z = place_experts(s, &r, "", 0, 0, {false, false}, dev);
    CHECK_FALSE(z.enabled);
    CHECK(z.n_device() == 2);
    CHECK(z.nvme_bytes_per_token == 0);
}

TEST_CASE("expert placement: experts on a fast GPU shorten decode, and the plan shows them", "[unit][planner][experts]") {
    const ModelShape s = moe_shape();
    const HardwareProfile hw = toy_with_gpu(2'000'000'000);
    const Workload wl{8, 4, 1, Objective::Latency};
    const Plan base = with_attention_on_gpu(
        expert_offload_plan(s, hw, wl, Budgets{2e9, 1e9, 1e12}, DType::F16, place_experts(s, nullptr, "", 8, 100'000'000)),
        s, hw, true);
    DeviceExperts dev;
    dev.slots = 4;
    const Plan with = with_experts_on_gpu(base, s, hw, nullptr, "none saved", dev);
    REQUIRE(with.experts.n_device() == 4);
    CHECK(with.experts.device_share == std::vector<double>{0.5, 0.5});
    // Half of each layer's chosen experts read at the GPU's 100 GB/s instead of the CPU's 10.
    CHECK(with.prediction.decode.time_s < base.prediction.decode.time_s);
    const CostModel cm(s, hw, wl, with.policy);
    constexpr int G = static_cast<int>(Stream::GpuCompute), C = static_cast<int>(Stream::CpuCompute);
    const Cost on = cm.hybrid_layer(0, with.experts, true), off = cm.hybrid_layer(0, base.experts, true);
    CHECK(on.decode[C] < off.decode[C]);
    CHECK(on.bytes[0] == Approx(off.bytes[0] + 2 * 100e6));  // two experts of the layer on the GPU
    // The device's work overlaps the CPU's: it adds to the GPU stream only beyond it.
    CHECK(on.decode[G] == Approx(off.decode[G]));
    CHECK(Plan::from_json(with.to_json()) == with);
    const std::string text = format_plan(with, s, hw, SearchStats{});
    CHECK_THAT(text, Catch::Contains("4 experts held on the device"));
    CHECK_THAT(text, Catch::Contains("2 device, "));
    CHECK_THAT(plan_summary(with), Catch::Contains("attention and 4 routed experts on the GPU"));

    // A GPU slower than the CPU gets none.
    HardwareProfile slow = hw;
    slow.gpu->mem_gbps = 1, slow.gpu->h2d_gbps = slow.gpu->d2h_gbps = 0.01;
    const Plan slow_base = with_attention_on_gpu(base, s, slow, true);
    CHECK_FALSE(with_experts_on_gpu(slow_base, s, slow, nullptr, "", dev).experts.has_device());
}

TEST_CASE("expert placement: a device that gave held experts back is priced with those it still holds",
          "[unit][planner][experts]") {
    const ModelShape s = moe_shape();
    const HardwareProfile hw = toy_with_gpu(2'000'000'000);
    const Workload wl{8, 4, 1, Objective::Latency};
    const RoutingProfile r = skewed_routing();
    const Plan base = with_attention_on_gpu(
        expert_offload_plan(s, hw, wl, Budgets{2e9, 1e9, 1e12}, DType::F16, place_experts(s, &r, "", 8, 100'000'000)), s,
        hw, true);
    DeviceExperts dev;
    dev.slots = 4;
    const Plan with = with_experts_on_gpu(base, s, hw, &r, "", dev);
    REQUIRE(with.experts.device == std::vector<std::vector<int32_t>>{{3, 2}, {1, 0}});
    // What it holds now, in any order: the same plan.
    const Plan same = with_held_experts(with, s, hw, &r, "", {{2, 3}, {0, 1}});
    CHECK(same.experts == with.experts);
    CHECK(same.prediction.decode.time_s == Approx(with.prediction.decode.time_s));
    // Layer 1's given back: its experts are the CPU's again, and a token takes longer.
    const Plan fewer = with_held_experts(with, s, hw, &r, "", {{3, 2}});
    CHECK(fewer.experts.device == std::vector<std::vector<int32_t>>{{3, 2}, {}});
    CHECK(fewer.experts.device_share == std::vector<double>{0.85, 0.0});
    CHECK(fewer.experts.device_bytes_per_token == Approx(200e6 * 0.85));
    CHECK(fewer.prediction.decode.time_s > with.prediction.decode.time_s);
    // Every one given back: priced as the attention alone on the GPU.
    const Plan none = with_held_experts(with, s, hw, &r, "", {});
    CHECK_FALSE(none.experts.has_device());
    CHECK(none.prediction.decode.time_s == Approx(base.prediction.decode.time_s));
}

TEST_CASE("expert placement: each held expert a pass chooses costs its device ops and its rows' copies",
          "[unit][planner][experts]") {
    ModelShape s = moe_shape();
    HardwareProfile hw = toy_with_gpu(2'000'000'000);
    hw.gpu->ops = DeviceOps{};
    hw.gpu->ops->op_overhead_us = 3;
    const Workload wl{8, 4, 1, Objective::Latency};
    ExpertPlan x = place_experts(s, nullptr, "", 8, 100'000'000);
    x.attention_on_gpu = true;
    x.device = {{0, 1}, {0, 1}};  // half of each layer's experts, half its choices
    x.device_share = {0.5, 0.5};
    auto overhead = [&](int32_t ops) {
        for (LayerShape& l : s.layers) l.device_expert_ops = ops;
        const Cost c = CostModel(s, hw, wl, Policy{1, 1, true, false, DType::F16}).hybrid_layer(0, x, true);
        return std::pair{c.decode_overhead, c.prefill_overhead};
    };
    const auto [decode4, prefill4] = overhead(4);
    const auto [decode0, prefill0] = overhead(0);
    // A decode token chooses 2 experts, one of them held on average: 4 ops of 3 us more. The
    // prompt's 8 tokens choose each held expert with 1 - (1 - 1/2)^8.
    CHECK(decode4 - decode0 == Approx(4 * 3e-6));
    CHECK(prefill4 - prefill0 == Approx(2 * (1 - std::pow(0.5, 8)) * 4 * 3e-6));
    // Without held experts, no ops.
    x.device = {{}, {}};
    x.device_share = {0, 0};
    CHECK(overhead(4).first == Approx(overhead(0).first));
}

// The host queues the device's rows up to a fill of their scratch (a pass's every choice, up to
// kDeviceExpertRows) and waits for each fill before the next; its own feed-forward (the shared
// experts, its own experts) starts after the last: it covers that fill's compute only. A device
// faster than the host's feed-forward is hidden behind it where a pass's choices fill the
// scratch once (a token choosing 2 of 4 experts, in passes of 64 or 256 rows), not where they
// fill it twice (12 of 16 experts, 3072 choices in a pass of 256 rows), where the first fill's
// time is the device's alone.
TEST_CASE("expert placement: the host's feed-forward overlaps only the device experts' last fill of scratch",
          "[unit][planner][experts]") {
    const HardwareProfile hw = toy_with_gpu(2'000'000'000);
    constexpr int G = static_cast<int>(Stream::GpuCompute), C = static_cast<int>(Stream::CpuCompute);
    struct Case {
        int32_t n_expert, n_expert_used, prompt;
        double fills;
    };
    for (const Case& k : {Case{4, 2, 64, 1}, Case{4, 2, 512, 1}, Case{16, 12, 512, 2}}) {
        INFO(k.n_expert_used << " of " << k.n_expert << " experts, a " << k.prompt << "-token prompt");
        ModelShape s = moe_shape();
        s.n_expert = k.n_expert, s.n_expert_used = k.n_expert_used;
        ExpertPlan none = place_experts(s, nullptr, "", 8, 100'000'000);
        none.attention_on_gpu = true;
        ExpertPlan every = none;  // every expert held: a token's choices all go to the device
        every.device.assign(2, {});
        for (int32_t e = 0; e < s.n_expert; ++e) every.device[0].push_back(e), every.device[1].push_back(e);
        every.device_share = {1.0, 1.0};
        const CostModel cm(s, hw, Workload{k.prompt, 4, 1, Objective::Latency}, Policy{1, 1, true, false, DType::F16});
        CHECK(cm.scratch_fills(std::min(k.prompt, 256) * double(k.n_expert_used)) == k.fills);
        const Cost held = cm.hybrid_layer(0, every, false);
        const double device = cm.device_experts(0, every).prefill[G];
        const double beyond_attention = held.prefill[G] - cm.hybrid_layer(0, none, false).prefill[G];
        REQUIRE(device > 0);
        REQUIRE(held.prefill[C] > device / k.fills);  // the host's feed-forward is the longer, a fill of it
        if (k.fills == 1) CHECK(beyond_attention == Approx(0).margin(1e-12));
        else CHECK(beyond_attention == Approx(device - device / k.fills));
    }
}

// The router chooses the device's experts before they run: its matmul is host work they do not
// overlap. The same layer's bytes, some of them its router's, hide less of the device's experts.
TEST_CASE("expert placement: the device's experts overlap the host's feed-forward after the router, not the router",
          "[unit][planner][experts]") {
    const HardwareProfile hw = toy_with_gpu(2'000'000'000);
    constexpr int G = static_cast<int>(Stream::GpuCompute), C = static_cast<int>(Stream::CpuCompute);
    auto beyond_attention = [&](uint64_t router_bytes, double& host, double& device) {
        ModelShape s = moe_shape();
        for (LayerShape& l : s.layers) {
            l.weight_bytes = l.n_matmul_params = 50'000'000;  // experts the device reads in less than the host's decode
            l.expert_bytes = l.n_expert_params = 40'000'000;
            l.router_bytes = router_bytes;
        }
        ExpertPlan none = place_experts(s, nullptr, "", 8, 100'000'000);
        none.attention_on_gpu = true;
        ExpertPlan every = none;
        every.device.assign(2, {0, 1, 2, 3});
        every.device_share = {1.0, 1.0};
        const CostModel cm(s, hw, Workload{64, 4, 1, Objective::Latency}, Policy{1, 1, true, false, DType::F16});
        const Cost held = cm.hybrid_layer(0, every, false);
        host = held.decode[C];
        device = cm.device_experts(0, every).decode[G];
        return held.decode[G] - cm.hybrid_layer(0, none, false).decode[G];
    };
    double host = 0, device = 0, host_routed = 0, device_routed = 0;
    const double hidden = beyond_attention(0, host, device);
    REQUIRE(host > device);
    CHECK(hidden == Approx(0).margin(1e-12));  // the host's feed-forward covers the device's experts
    const double after_router = beyond_attention(5'000'000, host_routed, device_routed);
    CHECK(host_routed == Approx(host));     // the same bytes on the host
    CHECK(device_routed == Approx(device));  // and on the device
    CHECK(after_router > 0);                 // fewer of them after the device's experts start
    CHECK(after_router < device);
    // A router priced above the host's share of the feed-forward hides none of them, and adds nothing.
    CHECK(beyond_attention(9'000'000, host_routed, device_routed) == Approx(device));
}
