#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "planner/catalog.h"
#include "planner/cost_model.h"
#include "planner/model_shape.h"
#include "planner/policy_search.h"
#include "tests/support/gguf_writer.h"
#include "tests/support/tiny_model.h"
#include "tests/support/toy_hardware.h"
#include "tests/support/toy_shape.h"

using namespace strata;
using namespace strata::planner;
using strata::test::toy_cpu;
using strata::test::toy_cpu_with_gpu;
using strata::test::toy_shape;

TEST_CASE("cost model: hand-computed decode and prefill for a CPU-only toy", "[unit][planner]") {
    const ModelShape s = toy_shape();
    const HardwareProfile hw = toy_cpu();
    const Workload wl{100, 11, 1, Objective::Latency};
    const CostModel cm(s, hw, wl, Policy{1, 1, true, false, DType::F16});

    // Decode, weights in DRAM: max(1 token x 1e9 flops / 100 GFLOPS, 1 GB / 10 GB/s) = 0.1 s of CPU.
    const Cost w = cm.layer_weights(0, WeightOption::DramCpu);
    CHECK(w.decode[static_cast<int>(Stream::CpuCompute)] == Approx(0.1));
    CHECK(w.decode[static_cast<int>(Stream::Dram)] == Approx(1e9 / 20e9));
    // Prefill: 100 tokens x 1e9 flops / 100 GFLOPS = 1 s.
    CHECK(w.prefill[static_cast<int>(Stream::CpuCompute)] == Approx(1.0));
    // From NVMe the layer also crosses the disk: 1 GB / 2 GB/s.
    CHECK(cm.layer_weights(0, WeightOption::NvmeCpu).decode[static_cast<int>(Stream::Nvme)] == Approx(0.5));
    CHECK_FALSE(cm.allowed(WeightOption::Gpu));
    CHECK_FALSE(cm.allowed(KvOption::Gpu));

    // KV: 2 x 1024 x 2 bytes = 4 KiB per token; decode reads the average context 100 + 11/2.
    const Cost kv = cm.layer_kv(0, KvOption::Dram);
    const double read = 105.5 * 4096;
    CHECK(kv.bytes[1] == Approx(111 * 4096));
    CHECK(kv.decode[static_cast<int>(Stream::CpuCompute)] == Approx(std::max(read / 10e9, 105.5 * 4 * 1024 / 100e9)));

    // A plan with everything in DRAM: decode = 4 layers x 0.1 s + what the rest adds.
    Plan p;
    p.n_layer = 4;
    for (int i = 0; i < 4; ++i) p.layers.push_back({i, WeightOption::DramCpu, KvOption::Dram, Device::Cpu});
    p.output = WeightOption::DramCpu;
    p.hidden = HiddenOption::Dram;
    const Prediction pred = cm.predict(p);
    CHECK(pred.decode.time_s == Approx(0.4).epsilon(0.01));
    CHECK(pred.decode.bottleneck == Stream::CpuCompute);
    CHECK(pred.total_s == Approx(pred.prefill.time_s + 10 * pred.decode.time_s));
    CHECK(pred.objective_s == Approx(pred.total_s / 11));
}


TEST_CASE("cost model: a streamed layer's read is priced at the disk's rate with the ring's reads in flight",
          "[unit][planner]") {
    ModelShape s = toy_shape();
    for (LayerShape& l : s.layers) l.weight_bytes = 1u << 20;  // 1 MiB layers: a ring of a few holds a few MiB
    HardwareProfile hw = toy_cpu();                            // read_gbps 2: the probe's deepest
    constexpr double MiB = 1u << 20;
    hw.nvme.read_depth_curve = {{1 * MiB, 0.5}, {4 * MiB, 1.0}, {32 * MiB, 2.0}};
    const Workload wl{100, 11, 1, Objective::Latency};
    const Policy pol{1, 1, true, false, DType::F16};
    auto read_s = [&](const HardwareProfile& h, int slots, double reader_bytes) {
        RuntimeLimits limits;
        limits.stream_slots = slots;
        limits.stream_inflight_bytes = reader_bytes;
        return CostModel(s, h, wl, pol, limits).layer_weights(0, WeightOption::NvmeCpu).decode[static_cast<int>(Stream::Nvme)];
    };
    // Two slots keep 2 MiB in flight: halfway (in log2) between the 1 MiB and 4 MiB rates.
    CHECK(read_s(hw, 2, 32 * MiB) == Approx(MiB / 0.75e9));
    CHECK(read_s(hw, 4, 32 * MiB) == Approx(MiB / 1.0e9));
    // The reader's queue caps what the slots put in flight.
    CHECK(read_s(hw, 64, 1 * MiB) == Approx(MiB / 0.5e9));
    // Beyond the deepest point: its rate.
    CHECK(read_s(hw, 64, 64 * MiB) == Approx(MiB / 2e9));
    // No ring (the LP's own pricing) or a profile from before the curve: the deep rate.
    CHECK(read_s(hw, 0, 32 * MiB) == Approx(MiB / 2e9));
    CHECK(read_s(hw, 2, 0) == Approx(MiB / 2e9));
    HardwareProfile old = hw;
    old.nvme.read_depth_curve.clear();
    CHECK(read_s(old, 2, 32 * MiB) == Approx(MiB / 2e9));
}

TEST_CASE("cost model: layers are read at the model file's rate, a spilled KV cache at the probe's", "[unit][planner]") {
    ModelShape s = toy_shape();
    HardwareProfile hw = toy_cpu();  // read_gbps 2
    constexpr double MiB = 1u << 20;
    hw.nvme.read_depth_curve = {{1 * MiB, 0.5}, {4 * MiB, 1.0}, {32 * MiB, 2.0}};
    const Workload wl{100, 11, 1, Objective::Latency};
    const Policy pol{1, 1, true, false, DType::F16};
    RuntimeLimits ring;
    ring.stream_slots = 4;
    ring.stream_inflight_bytes = 32 * MiB;
    const int N = static_cast<int>(Stream::Nvme);
    HardwareProfile slow_file = hw;
    slow_file.nvme.model_file_scale = 0.8;
    const CostModel probe_rate(s, hw, wl, pol, ring), file_rate(s, slow_file, wl, pol, ring);
    // A streamed layer of 1 GB: the ring keeps the reader's 32 MiB in flight (2 GB/s on the
    // curve), the model file reads at 0.8 of that; with no ring, at 0.8 of the deepest rate.
    CHECK(file_rate.layer_weights(0, WeightOption::NvmeCpu).decode[N] == Approx(1e9 / (2e9 * 0.8)));
    CHECK(probe_rate.layer_weights(0, WeightOption::NvmeCpu).decode[N] == Approx(1e9 / 2e9));
    CHECK(CostModel(s, slow_file, wl, pol).layer_weights(0, WeightOption::NvmeCpu).decode[N] == Approx(1e9 / (2e9 * 0.8)));
    // The KV cache spills to a scratch file of its own: the probe's rate.
    CHECK(file_rate.layer_kv(0, KvOption::Nvme).decode[N] == Approx(probe_rate.layer_kv(0, KvOption::Nvme).decode[N]));
    CHECK(probe_rate.layer_kv(0, KvOption::Nvme).decode[N] > 0);
    CHECK(slow_file.nvme.model_file_gbps_at(4 * MiB) == Approx(0.8));
    CHECK(slow_file.nvme.model_file_gbps_at(0) == Approx(1.6));
}

TEST_CASE("cost model: a spilled KV layer's reads are priced at the rate of its ring's bytes in flight", "[unit][planner]") {
    const ModelShape s = toy_shape();
    HardwareProfile hw = toy_cpu();  // read_gbps 2
    constexpr double MiB = 1u << 20;
    hw.nvme.read_depth_curve = {{1 * MiB, 0.5}, {4 * MiB, 1.0}, {32 * MiB, 2.0}};
    const Workload wl{100, 11, 1, Objective::Latency};
    const Policy pol{1, 1, true, false, DType::F16};
    auto kv_s = [&](double reader_bytes, int slots = 64) {  // 64: the slots hold more than the reader keeps in flight
        RuntimeLimits limits;
        limits.stream_slots = slots;
        limits.kv_spill_inflight_bytes = reader_bytes;
        return CostModel(s, hw, wl, pol, limits).layer_kv(0, KvOption::Nvme).decode[static_cast<int>(Stream::Nvme)];
    };
    // The same bytes read at 0.5, 1 and 2 GB/s (the reader's 1 or 4 MiB in flight, or the deep
    // rate), plus the same writes: the steps between them 1/0.5 - 1/1 = 2 x (1/1 - 1/2).
    const double at_1mib = kv_s(1 * MiB), at_4mib = kv_s(4 * MiB), deep = kv_s(0);
    REQUIRE(deep > 0);
    CHECK(at_1mib - at_4mib == Approx(2 * (at_4mib - deep)));
    CHECK(at_4mib > deep);
    // One slot of this layer's reads (under 1 MiB) is all a ring of one keeps in flight.
    CHECK(kv_s(32 * MiB, 1) == Approx(at_1mib));
}

TEST_CASE("cost model: a mixture of experts reads the experts its tokens choose", "[unit][planner]") {
    // The toy's layers with 0.8 GB of experts (0.4 G of its 0.5 G matmul parameters), 8 of 32 used.
    ModelShape s = toy_shape();
    for (auto& l : s.layers) l.expert_bytes = 800'000'000, l.n_expert_params = 400'000'000;
    s.n_expert = 32, s.n_expert_used = 8;
    const HardwareProfile hw = toy_cpu();
    const CostModel cm(s, hw, Workload{100, 11, 1, Objective::Latency}, Policy{1, 1, true, false, DType::F16});
    const Cost w = cm.layer_weights(0, WeightOption::DramCpu);
    // Decode of one token: 0.2 GB dense + 8/32 of 0.8 GB = 0.4 GB at 10 GB/s.
    CHECK(w.decode[static_cast<int>(Stream::CpuCompute)] == Approx(0.04));
    CHECK(w.decode[static_cast<int>(Stream::Dram)] == Approx(0.4e9 / 20e9));
    // Prefill of 100 tokens: 0.1 + 0.1 G active parameters a token, 2 flops each: 100 x 0.4 GFLOP / 100 GFLOPS.
    CHECK(w.prefill[static_cast<int>(Stream::CpuCompute)] == Approx(0.4));
    // 100 tokens touch nearly every expert: 1 - (3/4)^100 of them.
    CHECK(s.read_bytes(s.layers[0], 100) == Approx(0.2e9 + 0.8e9 * (1 - std::pow(0.75, 100))));
    // The layer takes all its bytes wherever it lies, and streams all of them from disk.
    CHECK(w.bytes[1] == Approx(1e9));
    CHECK(cm.layer_weights(0, WeightOption::NvmeCpu).decode[static_cast<int>(Stream::Nvme)] == Approx(0.5));
}
TEST_CASE("cost model: phase time overlaps streams, and compute across micro-batches only", "[unit][planner]") {
    const ModelShape s = toy_shape();
    const HardwareProfile hw = toy_cpu();
    const Workload wl{100, 11, 4, Objective::Throughput};
    Cost c;
    c.decode[static_cast<int>(Stream::GpuCompute)] = 2;
    c.decode[static_cast<int>(Stream::CpuCompute)] = 1;
    c.decode[static_cast<int>(Stream::Nvme)] = 2.5;
    const CostModel one(s, hw, wl, Policy{4, 1, true, false, DType::F16});
    CHECK(one.phase_time(Phase::Decode, c).time_s == Approx(3));  // 2 + 1 in series
    const CostModel four(s, hw, wl, Policy{4, 4, true, false, DType::F16});
    const PhaseTimes t = four.phase_time(Phase::Decode, c);
    CHECK(t.time_s == Approx(2.5));  // 2 + 1/4 < NVMe's 2.5
    CHECK(t.bottleneck == Stream::Nvme);
}

TEST_CASE("predicted time is monotone in every bandwidth", "[unit][planner]") {
    // Llama-3-70B in F16 does not fit GPU + DRAM: it uses every link.
    const ModelShape s = ModelShape::from_catalog("llama3-70b", DType::F16);
    const Workload wl{512, 32, 4, Objective::Latency};
    DryRunSpec spec;
    spec.gpu = "rtx4090";
    spec.dram = 96ull << 30;
    const HardwareProfile base = profile_from_catalog(spec);
    PlannerOptions opts;
    opts.budgets = default_budgets(base);

    // The LP optimum over all policies: exactly monotone, as every cost falls with bandwidth.
    auto objective = [&](const HardwareProfile& hw) {
        double best = INFINITY;
        for (const Plan& p : search_plans(s, hw, wl, opts).candidates) best = std::min(best, p.lp_bound_s);
        return best;
    };
    auto rounded = [&](const HardwareProfile& hw) { return make_plan(s, hw, wl, opts).prediction.objective_s; };
    const std::vector<double> scale = {0.5, 1, 2, 4};
    auto sweep = [&](auto&& set) {
        double prev_lp = INFINITY, prev_rounded = INFINITY;
        for (double f : scale) {
            HardwareProfile hw = base;
            set(hw, f);
            const double lp = objective(hw), r = rounded(hw);
            CHECK(lp <= prev_lp * (1 + 1e-7));
            CHECK(r <= prev_rounded * 1.03);  // whole layers: within the rounding loss
            prev_lp = lp, prev_rounded = r;
        }
    };
    SECTION("NVMe") { sweep([](HardwareProfile& h, double f) { h.nvme.read_gbps *= f, h.nvme.write_gbps *= f; }); }
    SECTION("PCIe") { sweep([](HardwareProfile& h, double f) { h.gpu->h2d_gbps *= f, h.gpu->d2h_gbps *= f; }); }
    SECTION("DRAM") { sweep([](HardwareProfile& h, double f) { h.dram.read_gbps *= f; }); }
    SECTION("GPU memory bandwidth") { sweep([](HardwareProfile& h, double f) { h.gpu->mem_gbps *= f; }); }
    SECTION("CPU") { sweep([](HardwareProfile& h, double f) { h.cpu.gemv_gbps *= f, h.cpu.gemm_gflops *= f, h.cpu.attention_gbps *= f; }); }
}

TEST_CASE("cost model: CPU decode attention priced by the probe's tile model, tiles spread over the threads",
          "[unit][planner]") {
    const ModelShape s = toy_shape();  // 8 KV heads of 128, one query head each
    HardwareProfile hw = toy_cpu();
    // 1 ns per K/V value of a tile, nothing else: a tile of n keys takes n x 128 ns.
    hw.cpu.attention_tile = AttentionTileCost{{{DType::F16, 1.0}}, 0, 0, 0, 0};
    const Workload wl{100, 11, 1, Objective::Latency};
    const double tile = 105.5 * 128 * 1e-9;  // the average context of the decode steps
    auto attention = [&](int threads, int batch) {
        hw.cpu.n_threads = threads;
        const CostModel cm(s, hw, wl, Policy{batch, 1, true, false, DType::F16});
        return cm.layer_kv(0, KvOption::Dram).decode[static_cast<int>(Stream::CpuCompute)];
    };
    // One sequence: its 8 tiles go to the threads one at a time (cpu/attention_cpu.cpp).
    CHECK(attention(2, 1) == Approx(4 * tile));
    CHECK(attention(3, 1) == Approx(3 * tile));
    // Several sequences share one loop over all their tiles (cpu::attention_batch): 40 tiles.
    CHECK(attention(2, 5) == Approx(20 * tile));
}

TEST_CASE("cost model with a device: CPU attention beside it costs depth x batch at the CPU's rate, split over "
          "every thread, in two sub-batches that overlap the device's matmuls", "[unit][planner]") {
    const ModelShape s = toy_shape();  // 8 KV heads of 128, one query head each; 4 layers
    HardwareProfile hw = toy_cpu();     // DRAM 20 GB/s
    hw.gpu = GpuProfile{"toy gpu", 8ull << 30, 1000, 100, 10, 10, "", 0};
    hw.cpu.n_threads = 3;
    // 1 ns per K/V value of a tile: a tile of n keys takes n x 128 ns.
    hw.cpu.attention_tile = AttentionTileCost{{{DType::F16, 1.0}}, 0, 0, 0, 0};
    constexpr int G = static_cast<int>(Stream::GpuCompute), C = static_cast<int>(Stream::CpuCompute);
    auto model = [&](int32_t depth, int batch) {
        // Steps attend to `depth` positions on average.
        return CostModel(s, hw, Workload{depth - 1, 2, batch, Objective::Throughput}, Policy{batch, 1, true, false, DType::F16});
    };
    auto attention = [&](int32_t depth, int batch) { return model(depth, batch).layer_kv(0, KvOption::Dram).decode[C]; };
    // Depth 4096: each row in 8 parts of 512 keys (cpu/attention_cpu.h); 4 sequences in two
    // sub-batches of 2, each one loop of 2 x 8 heads x 8 parts = 128 tiles on 3 threads.
    const double part = 512 * 128e-9;
    CHECK(attention(4096, 4) == Approx(2 * std::ceil(128 / 3.0) * part));
    // Twice the depth or twice the batch, twice the time (to the threads' rounding).
    CHECK(attention(8192, 4) / attention(4096, 4) == Approx(2).epsilon(0.02));
    CHECK(attention(4096, 8) / attention(4096, 4) == Approx(2).epsilon(0.02));
    // A kernel faster than DRAM: every thread together reads at DRAM's 20 GB/s (4 KiB of F16 K
    // and V per token and layer), each sub-batch in turn.
    hw.cpu.attention_tile = AttentionTileCost{{{DType::F16, 0.001}}, 0, 0, 0, 0};
    CHECK(attention(4096, 4) == Approx(2 * 2 * 4096 * 4096 / 20e9));
    hw.cpu.attention_tile = AttentionTileCost{{{DType::F16, 1.0}}, 0, 0, 0, 0};
    // It overlaps the device's matmuls: a step of layers whose device work exceeds the
    // attention takes the device's time (and the fill and drain), not the two added.
    const CostModel cm = model(4096, 4);
    Cost step = cm.layer_kv(0, KvOption::Dram).scaled(4);
    CHECK(step.decode_overlapped == Approx(step.decode[C]));
    step.decode[G] = 2 * step.decode[C];
    const double t = cm.phase_time(Phase::Decode, step).time_s - step.decode_overhead;
    CHECK(t == Approx(step.decode[G] + (step.decode[G] + step.decode[C]) / 8));
    CHECK(t < step.decode[G] + step.decode[C]);
}

TEST_CASE("cost model with a device: a plan whose CPU attends keeps every layer's KV in host memory, as the runtime "
          "does, so it is priced as the CPU attending", "[unit][planner]") {
    const ModelShape s = toy_shape();
    HardwareProfile hw = toy_cpu_with_gpu();
    const Workload wl{2048, 16, 4, Objective::Throughput};
    const CostModel cpu_attends(s, hw, wl, Policy{4, 1, true, false, DType::F16});
    CHECK_FALSE(cpu_attends.allowed(KvOption::Gpu));
    CHECK_FALSE(cpu_attends.allowed(KvOption::ActGpu));
    CHECK(cpu_attends.allowed(KvOption::Dram));
    CHECK(CostModel(s, hw, wl, Policy{4, 1, false, false, DType::F16}).allowed(KvOption::Gpu));
    // `--attention cpu`: the plan the search makes has no KV on the device, though it would fit.
    PlannerOptions o;
    o.budgets = default_budgets(hw);
    o.require_cpu_attention = true;
    const Plan plan = make_plan(s, hw, wl, o);
    CHECK(plan.policy.cpu_attention);
    for (const LayerPlacement& l : plan.layers) CHECK(tier_of(l.kv) != Tier::Gpu);
    CHECK(plan.prediction.decode.stream_s[static_cast<int>(Stream::CpuCompute)] > 0);
}

TEST_CASE("cost model: an attention tile from DRAM reads in place of converting, its rows' products on top",
          "[unit][planner]") {
    // 0.3 ns per K/V value converted, 0.1 ns per query row and value, 500 ns a tile, 4 GB/s a thread from DRAM.
    const AttentionTileCost t{{{DType::F16, 0.3}}, 0.1, 0, 4, 500};
    const double convert = 1000 * 0.3 * 64e-9, rows = 500e-9 + 1000 * 3 * 0.1 * 64e-9, read = 1000 * 256 / 4e9;
    CHECK(t.tile_s(DType::F16, 1000, 3, 64) == Approx(convert + rows));
    CHECK(t.tile_s(DType::F16, 1000, 3, 64, true, 256) == Approx(read + rows));
    // A read faster than the conversion leaves the conversion's time.
    CHECK(t.tile_s(DType::F16, 1000, 3, 64, true, 1) == Approx(convert + rows));
}

TEST_CASE("cost model: a decode matmul call costs a fixed part and a part per byte of its rows", "[unit][planner]") {
    const ModelShape s = toy_shape();  // n_embd 1024, queries 8 x 128, n_ff 4096
    HardwareProfile hw = toy_cpu();
    // Q8_0: 34 bytes per 32 values. 2 us a call and 1 ns per row byte.
    hw.cpu.rates = {{DType::Q8_0, 10, 100, 0, 2, 1}};
    ModelShape q8 = s;
    q8.weight_type = DType::Q8_0;
    const double row = 1024 / 32 * 34, ff_row = 4096 / 32 * 34;
    CHECK(hw.cpu.call_s_for(DType::Q8_0, 1024) == Approx((2000 + row) * 1e-9));
    const Workload wl{100, 11, 1, Objective::Latency};
    const CostModel with(q8, hw, wl, Policy{1, 1, true, false, DType::F16});
    hw.cpu.rates[0].call_us = hw.cpu.rates[0].call_ns_per_row_byte = 0;
    const CostModel without(q8, hw, wl, Policy{1, 1, true, false, DType::F16});
    constexpr int C = static_cast<int>(Stream::CpuCompute);
    // q/k/v, output and gate/up on 1024-value rows, down on 4096-value ones.
    const double calls = (4 * 2000 + 3 * row + ff_row) * 1e-9;
    CHECK(with.layer_weights(0, WeightOption::DramCpu).decode[C] - without.layer_weights(0, WeightOption::DramCpu).decode[C] ==
          Approx(calls));
    CHECK(with.output(WeightOption::DramCpu).decode[C] - without.output(WeightOption::DramCpu).decode[C] ==
          Approx((2000 + row) * 1e-9));
}

namespace {
// A layer's decode launches priced for `s` (its weights taken as Q8_0) on a measured device: 2 us
// a call and 1 ns per row byte, 3 us an op.
double device_decode_overhead(ModelShape s) {
    s.weight_type = DType::Q8_0;
    HardwareProfile hw = toy_cpu_with_gpu();
    hw.gpu->ops = DeviceOps{1, {{DType::Q8_0, 10, 100, 0, 2, 1}}};
    hw.gpu->ops->op_overhead_us = 3;
    const Workload wl{100, 11, 1, Objective::Latency};
    return CostModel(s, hw, wl, Policy{1, 1, true, false, DType::F16}).layer_weights(1, WeightOption::Gpu).decode_overhead;
}
}  // namespace

TEST_CASE("cost model: a layer whose q/k/v or gate/up mix types takes a device decode launch a run of one type",
          "[unit][planner]") {
    const nlohmann::json config = strata::test::with_q8_0(strata::test::tiny_config("llama", 64, 3, 128));
    // F32 matrices among Q8_0 ones, and the launches they add (q, k, v and gate, up each launch
    // together while their type stays the same).
    const std::vector<std::pair<std::vector<std::string>, int>> cases = {
        {{}, 0}, {{"attn_v.weight"}, 1}, {{"attn_k.weight"}, 2}, {{"attn_v.weight", "ffn_up.weight"}, 2}};
    for (const auto& [f32, extra] : cases) {
        INFO("F32: " << nlohmann::json(f32).dump());
        nlohmann::json c = config;
        c["f32_matrices"] = f32;
        const std::filesystem::path path = strata::test::temp_path("mixed_types.gguf");
        strata::test::write_tiny_model(c, 1, 1e-5f, path);
        const ModelShape shape = ModelShape::from_gguf(path);
        std::filesystem::remove(path);
        for (const LayerShape& l : shape.layers) CHECK(l.extra_decode_launches == extra);
        CHECK(shape.mean_extra_decode_launches() == extra);
    }

    // One of the toy's four layers with the extra launch, on n_embd-wide rows: a layer's launches
    // are priced at the model's mean, a quarter of that call more.
    ModelShape s = toy_shape();
    s.layers[0].extra_decode_launches = 1;
    const double row = 1024 / 32 * 34;
    CHECK(device_decode_overhead(s) - device_decode_overhead(toy_shape()) == Approx((2000 + row) * 1e-9 / 4));
}

TEST_CASE("cost model: an architecture's bias adds, head norms and post-norms are a device op each", "[unit][planner]") {
    // The tensors that make them, counted per layer (the ops' own count, against the device
    // backend's trace: tests/model/test_device_op_count.cpp): qwen2's three biases; qwen3's two
    // head norms; gemma2's two post-norms, the two residual adds they keep apart and GeGLU.
    const std::vector<std::pair<nlohmann::json, int>> cases = {
        {strata::test::tiny_config("llama", 64, 2, 96), 0},
        {[] { auto c = strata::test::tiny_config("qwen2", 64, 2, 96); c["qkv_bias"] = true; return c; }(), 3},
        {[] { auto c = strata::test::tiny_config("qwen3", 64, 2, 96); c["qk_norm"] = true; return c; }(), 2},
        {[] { auto c = strata::test::tiny_config("gemma2", 64, 2, 96); c["post_norms"] = true; return c; }(), 5}};
    for (const auto& [config, extra] : cases) {
        INFO(config.dump());
        const std::filesystem::path path = strata::test::temp_path("own_ops.gguf");
        strata::test::write_tiny_model(config, 1, 1e-5f, path);
        const ModelShape shape = ModelShape::from_gguf(path);
        std::filesystem::remove(path);
        for (const LayerShape& l : shape.layers) CHECK(l.extra_device_ops == extra);
        CHECK(shape.device_other_ops() == 2 + extra);
    }

    // One of the toy's four layers with five ops more: every layer five quarters of an op more.
    ModelShape s = toy_shape();
    s.layers[0].extra_device_ops = 5;
    CHECK(device_decode_overhead(s) - device_decode_overhead(toy_shape()) == Approx(5 * 3e-6 / 4));
}

TEST_CASE("cost model: KV recomputed on a measured device costs its rebuild's ops, a chunk of 256 positions at a time",
          "[unit][planner]") {
    ModelShape s = toy_shape();
    for (LayerShape& l : s.layers) l.rebuild_ops = 4;
    HardwareProfile hw = toy_cpu_with_gpu();
    hw.gpu->ops = DeviceOps{};
    hw.gpu->ops->op_overhead_us = 3;
    // A decode step attends to 1000 + 100 / 2 positions on average: 5 chunks of 4 ops, and the
    // saved inputs' store and unfused norm. The 1000-token prompt runs in 4 passes of 256 rows,
    // each with those two, the second rebuilding 1 chunk, the third 2, the fourth 3.
    const CostModel cm(s, hw, Workload{1000, 100, 1, Objective::Latency}, Policy{1, 1, false, true, DType::F16});
    const Cost kept = cm.layer_kv(0, KvOption::Gpu), rebuilt = cm.layer_kv(0, KvOption::ActGpu);
    CHECK(rebuilt.decode_overhead - kept.decode_overhead == Approx((2 + 5 * 4) * 3e-6));
    CHECK(rebuilt.prefill_overhead - kept.prefill_overhead == Approx((4 * 2 + 6 * 4) * 3e-6));
    // The prompt's rebuilt chunks cost their flops too: 6 x 256 positions' K and V.
    constexpr int G = static_cast<int>(Stream::GpuCompute);
    CHECK(rebuilt.prefill[G] - kept.prefill[G] >= Approx(6 * 256 * s.recompute_flops_per_token() / (hw.gpu->fp16_tflops * 1e12)));
    // A device whose ops were not measured: none priced.
    hw.gpu->ops.reset();
    const CostModel catalog(s, hw, Workload{1000, 100, 1, Objective::Latency}, Policy{1, 1, false, true, DType::F16});
    CHECK(catalog.layer_kv(0, KvOption::ActGpu).decode_overhead == catalog.layer_kv(0, KvOption::Gpu).decode_overhead);
}

TEST_CASE("cost model: a decode step's working set near the cache's size reads part of its weights from it",
          "[unit][planner]") {
    CpuProfile cpu;
    CHECK(cpu.reuse(1e9) == 1);  // no curve measured
    cpu.cache_curve = {{8e6, 30}, {32e6, 30}, {128e6, 20}, {512e6, 15}};
    CHECK(cpu.reuse(4e6) == Approx(2));     // below the curve: its first rate
    CHECK(cpu.reuse(32e6) == Approx(2));
    CHECK(cpu.reuse(64e6) == Approx(25.0 / 15));  // halfway on a log scale between 32 and 128 MB
    CHECK(cpu.reuse(1e9) == 1);             // past the curve: DRAM
    // The decode weights of the toy (4 GB) are far past it: no change; a model of 64 MB is read
    // at 25/15 of the GEMV rate.
    const ModelShape s = toy_shape();
    HardwareProfile hw = toy_cpu();
    const Workload wl{1, 2, 1, Objective::Latency};
    constexpr int C = static_cast<int>(Stream::CpuCompute);
    const double plain = CostModel(s, hw, wl, Policy{1, 1, true, false, DType::F16}).layer_weights(0, WeightOption::DramCpu).decode[C];
    hw.cpu.cache_curve = cpu.cache_curve;
    CHECK(CostModel(s, hw, wl, Policy{1, 1, true, false, DType::F16}).layer_weights(0, WeightOption::DramCpu).decode[C] ==
          Approx(plain));
    ModelShape small = s;
    small.layers.assign(4, LayerShape{16'000'000, 8'000'000, 8'000'000});
    small.output_bytes = 0;
    hw.cpu.cache_curve.clear();
    const double small_plain =
        CostModel(small, hw, wl, Policy{1, 1, true, false, DType::F16}).layer_weights(0, WeightOption::DramCpu).decode[C];
    hw.cpu.cache_curve = cpu.cache_curve;
    const double small_reused =
        CostModel(small, hw, wl, Policy{1, 1, true, false, DType::F16}).layer_weights(0, WeightOption::DramCpu).decode[C];
    CHECK(small_reused == Approx(small_plain * 15 / 25).epsilon(0.02));

    // No faster than the threads take weights in: one thread measured at 12 GB/s (the pool's 10
    // lifted to 16.7 by the reuse) reads at 12; two threads' 24 leave the reused rate.
    small.weight_type = DType::Q8_0;
    hw.cpu.rates = {{DType::Q8_0, 10, 100}};
    hw.cpu.rates[0].gemv_thread_gbps = 12;
    auto decode_s = [&](int threads) {
        hw.cpu.n_threads = threads;
        return CostModel(small, hw, wl, Policy{1, 1, true, false, DType::F16}).layer_weights(0, WeightOption::DramCpu).decode[C];
    };
    hw.cpu.cache_curve.clear();
    const double q8_plain = decode_s(1);
    hw.cpu.cache_curve = cpu.cache_curve;
    CHECK(decode_s(1) == Approx(q8_plain * 10 / 12).epsilon(0.02));
    CHECK(decode_s(2) == Approx(q8_plain * 15 / 25).epsilon(0.02));
}

TEST_CASE("cost model: the simulated device's weights are host memory, read through the host's caches as the "
          "CPU's; a GPU's are not",
          "[unit][planner]") {
    ModelShape small = toy_shape();
    small.weight_type = DType::Q8_0;
    small.layers.assign(4, LayerShape{16'000'000, 8'000'000, 8'000'000});
    small.output_bytes = 0;
    HardwareProfile hw = toy_cpu_with_gpu();
    hw.gpu->ops = DeviceOps{1, {{DType::Q8_0, 10, 100}}};  // 10 GB/s a row, measured past the caches
    const Workload wl{1, 2, 1, Objective::Latency};
    constexpr int G = static_cast<int>(Stream::GpuCompute);
    auto decode_s = [&](const HardwareProfile& h) {
        return CostModel(small, h, wl, Policy{1, 1, true, false, DType::F16}).layer_weights(0, WeightOption::Gpu).decode[G];
    };
    const std::vector<std::pair<double, double>> curve = {{8e6, 30}, {32e6, 30}, {128e6, 20}, {512e6, 15}};
    for (const int sim_threads : {0, 1}) {
        INFO((sim_threads ? "the simulated device" : "a GPU"));
        hw.gpu->sim_threads = sim_threads;
        hw.cpu.cache_curve.clear();
        const double past_caches = decode_s(hw);
        hw.cpu.cache_curve = curve;
        // A step of 64 MB: 25 GB/s on the curve against 15 past it.
        CHECK(decode_s(hw) == Approx(sim_threads ? past_caches * 15 / 25 : past_caches).epsilon(0.02));
    }
    // The simulated device's one thread no faster than one CPU thread's measured 12 GB/s.
    hw.cpu.rates = {{DType::Q8_0, 20, 100}};
    hw.cpu.rates[0].gemv_thread_gbps = 12;
    hw.cpu.cache_curve.clear();
    const double past_caches = decode_s(hw);
    hw.cpu.cache_curve = curve;
    CHECK(decode_s(hw) == Approx(past_caches * 10 / 12).epsilon(0.02));
}

TEST_CASE("a pool of fewer CPU threads than the machine has gets its share of the matmul rates, at most what one "
          "thread measured alone per thread",
          "[unit][planner]") {
    HardwareProfile hw = toy_cpu();
    hw.dram.read_gbps = 100;  // faster than the threads' GEMV: their probe read none of it from a cache
    hw.cpu.n_threads = 4;
    hw.cpu.rates = {{DType::Q4_0, 40, 400, 20, 0, 0, 300}, {DType::Q8_0, 40, 400, 20, 0, 0, 300}};
    hw.sim = DeviceOps{};
    hw.sim->n_threads = 1;
    hw.sim->rates = {{DType::Q4_0, 6, 150, 0, 0, 0, 60}};  // one thread alone: less than a quarter of the four's Q4_0
    CHECK(hw.on_cpu_threads(4) == hw);
    CHECK(hw.on_cpu_threads(0) == hw);
    const HardwareProfile two = hw.on_cpu_threads(2);
    CHECK(two.cpu.n_threads == 2);
    const KernelRate* q4 = rate_for(two.cpu.rates, DType::Q4_0);
    const KernelRate* q8 = rate_for(two.cpu.rates, DType::Q8_0);
    CHECK(q4->gemv_gbps == Approx(12));    // 2 x 6, below half of 40
    CHECK(q4->gemm_gflops == Approx(200)); // half of 400, below 2 x 150
    CHECK(q4->pack_gbps == Approx(10));
    CHECK(q4->gemm_narrow_gflops == Approx(120));  // 2 x 60, below half of 300
    CHECK(q8->gemv_gbps == Approx(20));    // no one-thread figure: the share
    CHECK(q8->gemm_narrow_gflops == Approx(150));
    // Where the probe measured one thread alone (on tiled weights, as the engine holds them), a
    // pool of fewer threads decodes at that rate per thread, up to what all of them reach; the
    // simulated device's rate (untiled weights) no longer caps it.
    hw.cpu.rates[0].gemv_thread_gbps = 15;
    CHECK(rate_for(hw.on_cpu_threads(2).cpu.rates, DType::Q4_0)->gemv_gbps == Approx(30));  // 2 x 15, below 40
    CHECK(rate_for(hw.on_cpu_threads(1).cpu.rates, DType::Q4_0)->gemv_gbps == Approx(15));  // not a quarter of 40
    hw.cpu.rates[0].gemv_thread_gbps = 30;
    CHECK(rate_for(hw.on_cpu_threads(2).cpu.rates, DType::Q4_0)->gemv_gbps == Approx(40));  // all four's
    CHECK(rate_for(hw.on_cpu_threads(2).cpu.rates, DType::Q4_0)->gemm_gflops == Approx(200));  // arithmetic: the share
    hw.cpu.rates[0].gemv_thread_gbps = 0;
    // A narrow layer's decode rate likewise: one thread's measured rate per thread, up to all of
    // them; without a one-thread figure, the share.
    hw.cpu.rates[0].gemv_narrow_gbps = 32;
    CHECK(rate_for(hw.on_cpu_threads(2).cpu.rates, DType::Q4_0)->gemv_narrow_gbps == Approx(16));
    hw.cpu.rates[0].gemv_thread_narrow_gbps = 12;
    CHECK(rate_for(hw.on_cpu_threads(1).cpu.rates, DType::Q4_0)->gemv_narrow_gbps == Approx(12));
    CHECK(rate_for(hw.on_cpu_threads(2).cpu.rates, DType::Q4_0)->gemv_narrow_gbps == Approx(24));
    CHECK(rate_for(hw.on_cpu_threads(3).cpu.rates, DType::Q4_0)->gemv_narrow_gbps == Approx(32));  // all four's
    hw.cpu.rates[0].gemv_narrow_gbps = hw.cpu.rates[0].gemv_thread_narrow_gbps = 0;
    // Decode on the two threads takes longer by the rates' ratio (DRAM faster than either).
    ModelShape s;
    s.name = "toy", s.family = "llama", s.weight_type = DType::Q8_0;
    s.n_layer = 1, s.n_embd = 1024, s.n_head = 8, s.n_head_kv = 8, s.head_dim = 128, s.n_ff = 4096, s.n_vocab = 1000;
    s.layers.assign(1, LayerShape{1'000'000'000, 500'000'000, 500'000'000});
    const Workload wl{1, 2, 1, Objective::Latency};
    constexpr int C = static_cast<int>(Stream::CpuCompute);
    auto decode_s = [&](const HardwareProfile& h) {
        return CostModel(s, h, wl, Policy{1, 1, true, false, DType::F16}).layer_weights(0, WeightOption::DramCpu).decode[C];
    };
    CHECK(decode_s(two) == Approx(2 * decode_s(hw)).epsilon(0.01));
}

// The probe measures one thread alone on the matrix the threads read together: where they read it
// faster than DRAM reads, part of it was in a cache, and one thread's figure ran from it as
// much. A pool of fewer threads streams DRAM at its figures taken down as much, wide and narrow
// (one thread of a 2-core VM with a shared cache of 480 MiB: 19.5 GB/s measured on the probe's
// 128 MiB, 14.5 on a 574 MiB model's decode, beside 39 GB/s on both threads and DRAM at 32).
TEST_CASE("a pool of fewer threads reads from DRAM at one thread's measured rate less what the probe's matrix had "
          "in a cache",
          "[unit][planner]") {
    HardwareProfile hw = toy_cpu();
    hw.cpu.n_threads = 2;
    hw.dram.read_gbps = 32;
    hw.cpu.rates = {{DType::Q4_0, 40, 400, 20}};
    hw.cpu.rates[0].gemv_thread_gbps = 20;
    hw.cpu.rates[0].gemv_narrow_gbps = 36, hw.cpu.rates[0].gemv_thread_narrow_gbps = 15;
    // Both threads read the matrix at 40 GB/s, DRAM at 32: a fifth of it came from a cache.
    CHECK(rate_for(hw.on_cpu_threads(1).cpu.rates, DType::Q4_0)->gemv_gbps == Approx(16));
    CHECK(rate_for(hw.on_cpu_threads(1).cpu.rates, DType::Q4_0)->gemv_narrow_gbps == Approx(12));
    // A model far past any cache decodes on one thread at that rate.
    ModelShape s;
    s.name = "toy", s.family = "llama", s.weight_type = DType::Q4_0;
    s.n_layer = 1, s.n_embd = 4096, s.n_head = 32, s.n_head_kv = 32, s.head_dim = 128, s.n_ff = 11008, s.n_vocab = 1000;
    s.layers.assign(1, LayerShape{1'600'000'000, 800'000'000, 800'000'000});
    constexpr int C = static_cast<int>(Stream::CpuCompute);
    const CostModel one(s, hw.on_cpu_threads(1), Workload{1, 2, 1, Objective::Latency}, Policy{1, 1, true, false, DType::F16});
    CHECK(one.layer_weights(0, WeightOption::DramCpu).decode[C] == Approx(1.6e9 / 16e9).epsilon(0.01));
    // DRAM faster than the threads' GEMV: one thread's figures stand.
    hw.dram.read_gbps = 64;
    CHECK(rate_for(hw.on_cpu_threads(1).cpu.rates, DType::Q4_0)->gemv_gbps == Approx(20));
    CHECK(rate_for(hw.on_cpu_threads(1).cpu.rates, DType::Q4_0)->gemv_narrow_gbps == Approx(15));
}

TEST_CASE("cost model: the CPU's decode rate on a narrow layer's matrices prices a narrow model's CPU layers",
          "[unit][planner]") {
    HardwareProfile hw = toy_cpu();
    hw.dram.read_gbps = 100;
    hw.cpu.rates = {{DType::Q8_0, 10, 100}};  // 10 GB/s on 4096-wide rows, no call costs
    constexpr int C = static_cast<int>(Stream::CpuCompute);
    auto decode_s = [&](int width) {
        ModelShape s;
        s.name = "toy", s.family = "llama", s.weight_type = DType::Q8_0;
        s.n_layer = 1, s.n_embd = width, s.n_head = 8, s.n_head_kv = 8, s.head_dim = 64, s.n_ff = 4 * width, s.n_vocab = 1000;
        s.layers.assign(1, LayerShape{1'000'000'000, 500'000'000, 500'000'000});  // far beyond any cache
        return CostModel(s, hw, Workload{1, 2, 1, Objective::Latency}, Policy{1, 1, true, false, DType::F16})
            .layer_weights(0, WeightOption::DramCpu)
            .decode[C];
    };
    CHECK(decode_s(576) == Approx(0.1));  // not measured narrow: the wide rate
    // Measured at 5 GB/s on a 512-wide layer: a 512-wide model's layer reads at it, a 4096-wide
    // one's at the wide rate, a 2048-wide one's two thirds of the way up on a log scale.
    hw.cpu.rates[0].gemv_narrow_gbps = 5;
    CHECK(decode_s(512) == Approx(0.2));
    CHECK(decode_s(4096) == Approx(0.1));
    CHECK(decode_s(2048) == Approx(1e9 / (5e9 + 2.0 / 3 * 5e9)));
}

TEST_CASE("a CPU decode matmul from DRAM is priced no faster than DRAM reads, whatever the probe's GEMV gave",
          "[unit][planner]") {
    HardwareProfile hw = toy_cpu();  // DRAM reads at 20 GB/s
    ModelShape s;
    s.name = "toy", s.family = "llama", s.weight_type = DType::Q8_0;
    s.n_layer = 1, s.n_embd = 1024, s.n_head = 8, s.n_head_kv = 8, s.head_dim = 128, s.n_ff = 4096, s.n_vocab = 1000;
    s.layers.assign(1, LayerShape{1'000'000'000, 500'000'000, 500'000'000});  // far beyond any cache
    const Workload wl{1, 2, 1, Objective::Latency};
    constexpr int C = static_cast<int>(Stream::CpuCompute);
    auto decode_s = [&](double gemv_gbps) {
        hw.cpu.rates = {{DType::Q8_0, gemv_gbps, 400, 0, 0, 0, 300}};
        return CostModel(s, hw, wl, Policy{1, 1, true, false, DType::F16}).layer_weights(0, WeightOption::DramCpu).decode[C];
    };
    CHECK(decode_s(10) == Approx(2 * decode_s(20)).epsilon(0.01));  // below DRAM's rate: the GEMV's
    CHECK(decode_s(40) == Approx(decode_s(20)).epsilon(0.001));      // above it: DRAM's
    CHECK(decode_s(20) >= 1e9 / 20e9);                               // the layer's bytes at 20 GB/s at least
}

TEST_CASE("cost model with a device: a CPU layer's prefill runs on the CPU, its hidden states hopping down and back",
          "[unit][planner]") {
    const ModelShape s = toy_shape();
    HardwareProfile hw = toy_cpu();
    const Workload wl{100, 11, 1, Objective::Latency};
    const Cost alone = CostModel(s, hw, wl, Policy{1, 1, true, false, DType::F16}).layer_weights(0, WeightOption::DramCpu);
    hw.gpu = GpuProfile{"toy gpu", 8ull << 30, 1000, 100, 10, 10, "", 0};
    const Cost with = CostModel(s, hw, wl, Policy{1, 1, true, false, DType::F16}).layer_weights(0, WeightOption::DramCpu);
    constexpr int C = static_cast<int>(Stream::CpuCompute), G = static_cast<int>(Stream::GpuCompute),
                  H = static_cast<int>(Stream::PcieH2D), D = static_cast<int>(Stream::PcieD2H);
    CHECK(with.prefill[C] == Approx(alone.prefill[C]));  // 100 tokens x 1e9 flops at 100 GFLOPS
    CHECK(with.prefill[G] == 0);
    CHECK(with.gpu_staging == 0);  // nothing of it is copied to the device
    // 100 tokens of 1024 floats each way at 10 GB/s; decode one token's.
    CHECK(with.prefill[H] == Approx(100 * 1024 * 4 / 10e9));
    CHECK(with.prefill[D] == Approx(100 * 1024 * 4 / 10e9));
    CHECK(with.decode[H] == Approx(1024 * 4 / 10e9));
}

TEST_CASE("cost model with a device: a run of CPU layers hops down and back once", "[unit][planner]") {
    const ModelShape s = toy_shape();
    HardwareProfile hw = toy_cpu_with_gpu();
    hw.gpu->handoff_us = 10;
    const Workload wl{100, 11, 1, Objective::Latency};
    const CostModel cm(s, hw, wl, Policy{1, 1, false, false, DType::F16});
    auto plan_of = [&](std::initializer_list<WeightOption> w) {
        Plan p;
        p.policy = Policy{1, 1, false, false, DType::F16};
        int il = 0;
        for (WeightOption o : w) p.layers.push_back({il++, o, KvOption::Dram, Device::Gpu});
        return p;
    };
    // The same layers, their two CPU layers together (one run) or apart (two).
    const Cost together = cm.total_cost(plan_of({WeightOption::Gpu, WeightOption::DramCpu, WeightOption::DramCpu, WeightOption::Gpu}));
    const Cost apart = cm.total_cost(plan_of({WeightOption::DramCpu, WeightOption::Gpu, WeightOption::DramCpu, WeightOption::Gpu}));
    constexpr int H = static_cast<int>(Stream::PcieH2D);
    CHECK(apart.decode_overhead - together.decode_overhead == Approx(10e-6));
    CHECK(apart.prefill_overhead - together.prefill_overhead == Approx(10e-6));
    CHECK(apart.decode[H] - together.decode[H] == Approx(1024 * 4 / 10e9));
}

TEST_CASE("cost model with a device: the LP's column for a group of CPU layers hops once, as the plan of that group does",
          "[unit][planner]") {
    const ModelShape s = toy_shape();
    HardwareProfile hw = toy_cpu_with_gpu();
    hw.gpu->handoff_us = 10;
    const Workload wl{100, 11, 1, Objective::Latency};
    const Policy pol{1, 1, false, false, DType::F16};
    const CostModel cm(s, hw, wl, pol);
    Plan p;
    p.policy = pol;
    for (int il = 0; il < s.n_layer; ++il) p.layers.push_back({il, WeightOption::DramCpu, KvOption::Dram, Device::Cpu});
    // The plan's cost as total_cost sums it layer by layer, against the LP's columns at 1.
    Cost columns = cm.fixed();
    columns += cm.run_weights(0, s.n_layer, WeightOption::DramCpu);
    for (int il = 0; il < s.n_layer; ++il) columns += cm.layer_kv_beside(il, KvOption::Dram, Device::Cpu);
    columns += cm.output(p.output);
    if (s.embd_bytes > 0) columns += cm.embedding(p.embedding);
    columns += cm.hidden(p.hidden);
    const Cost plan = cm.total_cost(p);
    constexpr int H = static_cast<int>(Stream::PcieH2D), D = static_cast<int>(Stream::PcieD2H);
    REQUIRE(s.n_layer > 1);
    CHECK(columns.decode_overhead == Approx(plan.decode_overhead));
    CHECK(columns.prefill_overhead == Approx(plan.prefill_overhead));
    CHECK(columns.decode[H] == Approx(plan.decode[H]));
    CHECK(columns.prefill[D] == Approx(plan.prefill[D]));
    // A run of one layer is the layer.
    CHECK(cm.run_weights(0, 1, WeightOption::DramCpu).decode_overhead == Approx(cm.layer_weights(0, WeightOption::DramCpu).decode_overhead));
}

TEST_CASE("cost model: a device's decode step reads its weights once per 16 sequences; the simulated device's "
          "calls of many rows pass over the weights, then compute",
          "[unit][planner]") {
    ModelShape s = toy_shape();
    s.weight_type = DType::Q8_0;
    HardwareProfile hw = toy_cpu();
    // 1000 GB/s, 100 TFLOPS: a 1 GB layer's decode is bound by its read, 1 ms per call.
    hw.gpu = GpuProfile{"toy gpu", 8ull << 30, 1000, 100, 10, 10, "", 0};
    constexpr int G = static_cast<int>(Stream::GpuCompute);
    auto decode_s = [&](const HardwareProfile& h, double batch) {
        const Workload wl{1, 2, static_cast<int>(batch), Objective::Throughput};
        return CostModel(s, h, wl, Policy{static_cast<int>(batch), 1, false, false, DType::F16})
            .layer_weights(0, WeightOption::Gpu)
            .decode[G];
    };
    CHECK(decode_s(hw, 8) == Approx(1e-3));
    CHECK(decode_s(hw, 16) == Approx(1e-3));  // one call of 16 rows
    CHECK(decode_s(hw, 17) == Approx(2e-3));
    CHECK(decode_s(hw, 33) == Approx(3e-3));
    // The simulated device at 10 GB/s, 100 GFLOPS, passing over the weights at 5 GB/s: 8 rows
    // of 1e9 flops take 80 ms of arithmetic plus 200 ms over the weights, added up; 4 rows (the
    // one-pass GEMV path) the larger of 40 ms of arithmetic and the 100 ms read.
    hw.gpu->mem_gbps = 10, hw.gpu->fp16_tflops = 0.1, hw.gpu->sim_threads = 1;
    hw.gpu->ops = DeviceOps{1, {{DType::Q8_0, 10, 100, 5}}};
    CHECK(decode_s(hw, 8) == Approx(0.08 + 0.2));
    CHECK(decode_s(hw, 4) == Approx(0.1));
    // Measured at one row a call (10 GB/s) and at eight (4 GB/s): a call of n rows lies between
    // them by its rows; the catalog's rates no longer enter.
    hw.gpu->ops->rates[0].rows8_gbps = 4;
    hw.gpu->mem_gbps = 1000;
    CHECK(decode_s(hw, 1) == Approx(0.1));
    CHECK(decode_s(hw, 8) == Approx(0.25));
    CHECK(decode_s(hw, 4) == Approx(0.1 + 3.0 / 7 * 0.15));
    CHECK(decode_s(hw, 16) == Approx(0.1 + 15.0 / 7 * 0.15));  // one call of 16, on the line through 1 and 8 rows
    CHECK(decode_s(hw, 32) == Approx(2 * (0.1 + 15.0 / 7 * 0.15)));
}

TEST_CASE("a decode call of a few rows takes the measured multiple of one row's time, linear between 1, 4 and 8 "
          "rows, by the model's width",
          "[unit][planner]") {
    KernelRate r{DType::Q4_0, 40, 400};
    CHECK(r.rows_time_scale(4) == 0);  // not measured
    r.rows8_gbps = 10;                 // 8 rows in 4x one row's time
    CHECK(r.rows_time_scale(1) == Approx(1));
    CHECK(r.rows_time_scale(8) == Approx(4));
    CHECK(r.rows_time_scale(4) == Approx(1 + 3.0 / 7 * 3));  // without 4 rows: the line from 1 to 8
    CHECK(r.rows_time_scale(9) == 0);                         // beyond what was measured
    r.rows4_gbps = 32;                                        // 4 rows in 1.25x
    CHECK(r.rows_time_scale(4) == Approx(1.25));
    CHECK(r.rows_time_scale(2) == Approx(1 + 0.25 / 3));
    CHECK(r.rows_time_scale(6) == Approx(1.25 + 0.5 * 2.75));
    // A device's call of up to 16 rows: the line through 4 and 8 rows, extended.
    CHECK(r.rows_time_scale(12, 0, 16) == Approx(1.25 + 2 * 2.75));
    CHECK(r.rows_time_scale(17, 0, 16) == 0);
    r.rows16_gbps = 40.0 / 6;  // 16 rows measured in 6x one row's time: the line from 8 rows to it
    CHECK(r.rows_time_scale(12, 0, 16) == Approx(5));
    CHECK(r.rows_time_scale(16, 0, 16) == Approx(6));
    CHECK(r.rows_time_scale(6) == Approx(1.25 + 0.5 * 2.75));  // up to 8 rows as before
    r.rows16_gbps = 0;
    // On a 512-wide layer one row reads at 20, four at 10, eight at 4: a narrow model takes 2x
    // and 5x, a 4096-wide one as measured wide, one between them on a log scale.
    r.gemv_narrow_gbps = 20, r.rows4_narrow_gbps = 10, r.rows8_narrow_gbps = 4;
    CHECK(r.rows_time_scale(4, 512) == Approx(2));
    CHECK(r.rows_time_scale(8, 512) == Approx(5));
    CHECK(r.rows_time_scale(4, 4096) == Approx(1.25));
    CHECK(r.rows_time_scale(8, 1024) == Approx((20 + 20.0 / 3) / (4 + 2)));
    // A narrow one-row rate against wide figures alone (a quick probe's 4 and 8 rows) never
    // prices more rows below one's time.
    r.rows4_narrow_gbps = r.rows8_narrow_gbps = 0;
    r.gemv_narrow_gbps = 5;
    CHECK(r.rows_time_scale(4, 512) == 1);
    CHECK(r.rows_time_scale(8, 512) == 1);
}

TEST_CASE("cost model: a CPU decode pass of a few tokens takes the probe's measured multiple of one token's time; "
          "past eight, packing and arithmetic add up",
          "[unit][planner]") {
    HardwareProfile hw = toy_cpu();
    hw.dram.read_gbps = 100;
    // One token 10 GB/s, four 5, eight 2; 100 GFLOPS; packing at 10 GB/s.
    hw.cpu.rates = {{DType::Q8_0, 10, 100, 10}};
    ModelShape s = toy_shape();
    s.weight_type = DType::Q8_0;
    s.n_embd = 4096;
    constexpr int C = static_cast<int>(Stream::CpuCompute);
    auto decode_s = [&](int batch) {
        return CostModel(s, hw, Workload{1, 2, batch, Objective::Throughput}, Policy{batch, 1, false, false, DType::F16})
            .layer_weights(0, WeightOption::DramCpu)
            .decode[C];
    };
    const double one = 1e9 / 10e9, flops = 2.0 * s.active_matmul_params(s.layers[0]);
    // Unmeasured: up to 4 tokens the longer of the read and the arithmetic, as before.
    CHECK(decode_s(4) == Approx(std::max(one, 4 * flops / 100e9)));
    hw.cpu.rates[0].rows4_gbps = 5, hw.cpu.rates[0].rows8_gbps = 2;
    CHECK(decode_s(1) == Approx(one));
    CHECK(decode_s(4) == Approx(2 * one));
    CHECK(decode_s(6) == Approx(3.5 * one));
    CHECK(decode_s(8) == Approx(5 * one));
    CHECK(decode_s(9) == Approx(9 * flops / 100e9 + 1e9 / 10e9));  // the GEMM's packed pass
    // A pool of fewer threads keeps the measured multiples.
    hw.cpu.n_threads = 4;
    const HardwareProfile on_two = hw.on_cpu_threads(2);
    const KernelRate* two = rate_for(on_two.cpu.rates, DType::Q8_0);
    CHECK(two->rows_time_scale(4) == Approx(2));
    CHECK(two->rows_time_scale(8) == Approx(5));
}

TEST_CASE("cost model: a device's decode rate on a narrow layer's matrices prices a narrow model's layers, "
          "not a wide one's",
          "[unit][planner]") {
    HardwareProfile hw = toy_cpu_with_gpu();
    hw.gpu->sim_threads = 1;
    // 10 GB/s on 4096-wide rows, no call costs: a 1 GB layer's one-token decode reads in 100 ms.
    hw.gpu->ops = DeviceOps{1, {{DType::Q8_0, 10, 100}}};
    constexpr int G = static_cast<int>(Stream::GpuCompute);
    auto decode_s = [&](int width) {
        ModelShape s = toy_shape();
        s.weight_type = DType::Q8_0;
        s.n_embd = width;
        return CostModel(s, hw, Workload{1, 2, 1, Objective::Throughput}, Policy{1, 1, false, false, DType::F16})
            .layer_weights(0, WeightOption::Gpu)
            .decode[G];
    };
    CHECK(decode_s(576) == Approx(0.1));
    CHECK(decode_s(4096) == Approx(0.1));
    // Measured at 4 GB/s on a 512-wide layer's matrices: a 512-wide model's layer reads at it, a
    // 4096-wide one's as before, a 2048-wide one's two thirds of the way up on a log scale.
    hw.gpu->ops->rates[0].gemv_narrow_gbps = 4;
    CHECK(decode_s(512) == Approx(0.25));
    CHECK(decode_s(4096) == Approx(0.1));
    CHECK(decode_s(2048) == Approx(1e9 / 8e9));
}

TEST_CASE("cost model: a measured device's decode attention from its points, linear in the K/V bytes read",
          "[unit][planner]") {
    DeviceOps o;
    constexpr double kPerKey = DeviceOps::kAttentionKvBytesPerKey;
    CHECK(o.attention_s(1e6) == 0);
    o.attention = {{512, 10}, {4096, 50}};
    CHECK(o.attention_s(256 * kPerKey) == Approx(5e-6));      // below the first point: its time per byte
    CHECK(o.attention_s(512 * kPerKey) == Approx(10e-6));
    CHECK(o.attention_s(2304 * kPerKey) == Approx(30e-6));    // halfway between the two
    CHECK(o.attention_s(7680 * kPerKey) == Approx(90e-6));    // beyond the last: the last two points' slope
}

TEST_CASE("cost model with a device: a CPU layer attends on the CPU to its KV in DRAM, whatever tier the plan gave it",
          "[unit][planner]") {
    const ModelShape s = toy_shape();
    const Workload wl{100, 11, 1, Objective::Latency};
    const Policy gpu_attention{1, 1, false, false, DType::F16};
    const CostModel cpu_only(s, toy_cpu(), wl, gpu_attention);
    HardwareProfile hw = toy_cpu_with_gpu();
    const CostModel cm(s, hw, wl, gpu_attention);
    Plan plan;
    plan.n_layer = 4;
    const LayerPlacement l{0, WeightOption::DramCpu, KvOption::Gpu, Device::Cpu};
    const Cost c = cm.placed_layer(plan, l);
    constexpr int C = static_cast<int>(Stream::CpuCompute), G = static_cast<int>(Stream::GpuCompute);
    CHECK(c.decode[G] == 0);
    CHECK(c.bytes[0] == 0);  // nothing on the device
    CHECK(c.bytes[1] == Approx(cm.layer_weights(0, WeightOption::DramCpu).bytes[1] + cpu_only.layer_kv(0, KvOption::Dram).bytes[1]));
    CHECK(c.decode[C] == Approx(cm.layer_weights(0, WeightOption::DramCpu).decode[C] + cpu_only.layer_kv(0, KvOption::Dram).decode[C]));
    // A device layer's KV stays where the plan put it.
    const LayerPlacement on_gpu{0, WeightOption::Gpu, KvOption::Gpu, Device::Gpu};
    CHECK(cm.placed_layer(plan, on_gpu).decode[G] ==
          Approx(cm.layer_weights(0, WeightOption::Gpu).decode[G] + cm.layer_kv(0, KvOption::Gpu).decode[G]));
}

TEST_CASE("a model's GEMM rate lies between the narrow layer's and the wide one's by its width", "[unit][planner]") {
    KernelRate r{DType::Q8_0, 10, 400};
    CHECK(r.gemm_at(576) == 400);  // no narrow rate measured: the wide one
    r.gemm_narrow_gflops = 100;
    CHECK(r.gemm_at(256) == Approx(100));   // narrower than measured: the narrow rate
    CHECK(r.gemm_at(512) == Approx(100));
    CHECK(r.gemm_at(1448.15) == Approx(250).epsilon(0.001));  // halfway between 512 and 4096 on a log scale
    CHECK(r.gemm_at(4096) == Approx(400));
    CHECK(r.gemm_at(8192) == Approx(400));
    // A prompt pass of a 1024-wide toy prices its matmuls at that width's rate.
    ModelShape s = toy_shape();
    s.weight_type = DType::Q8_0;
    HardwareProfile hw = toy_cpu();
    hw.cpu.rates = {r};
    const Workload wl{100, 11, 1, Objective::Latency};
    constexpr int C = static_cast<int>(Stream::CpuCompute);
    const double at_width = CostModel(s, hw, wl, Policy{1, 1, true, false, DType::F16}).layer_weights(0, WeightOption::DramCpu).prefill[C];
    CHECK(at_width == Approx(100 * 1e9 / (r.gemm_at(1024) * 1e9)));  // 100 tokens x 1e9 flops
}

TEST_CASE("cost model with a device: CPU attention overlaps the device's matmuls within a step for two sequences or more",
          "[unit][planner]") {
    const ModelShape s = toy_shape();
    HardwareProfile hw = toy_cpu_with_gpu();
    const Workload wl{100, 11, 4, Objective::Throughput};
    constexpr int G = static_cast<int>(Stream::GpuCompute), C = static_cast<int>(Stream::CpuCompute);
    Cost c;
    c.decode[G] = 2, c.decode[C] = 1.5, c.decode_overlapped = 1;  // 1 s of the CPU's is attention
    // Four sequences, two sub-batches: the attention hides under the device's 2 s; the other
    // 0.5 s of the CPU's does not; half a layer of each (of 4 layers) fills and drains.
    const CostModel four(s, hw, wl, Policy{4, 1, true, false, DType::F16});
    CHECK(four.attention_overlaps());
    CHECK(four.phase_time(Phase::Decode, c).time_s == Approx(2 + 0.5 + (2 + 1) / 8.0));
    // The CPU's attention longer than the device's work: it is the chain.
    c.decode_overlapped = 4, c.decode[C] = 4.5;
    CHECK(four.phase_time(Phase::Decode, c).time_s == Approx(4.5 + (2 + 4) / 8.0));
    // Prefill does not overlap (a prompt is one sub-batch); nor does one sequence, nor device attention.
    c.prefill[G] = 2, c.prefill[C] = 1;
    CHECK(four.phase_time(Phase::Prefill, c).time_s == Approx(3));
    for (const Policy& p : {Policy{1, 1, true, false, DType::F16}, Policy{4, 1, false, false, DType::F16}}) {
        const CostModel cm(s, hw, Workload{100, 11, p.batch, Objective::Throughput}, p);
        CHECK_FALSE(cm.attention_overlaps());
        CHECK(cm.phase_time(Phase::Decode, c).time_s == Approx(2 + 4.5));
    }
    // What kv_cost marks as overlapped: a device layer's CPU attention, all of it.
    const Cost kv = four.layer_kv(0, KvOption::Dram);
    CHECK(kv.decode[C] > 0);
    CHECK(kv.decode_overlapped == Approx(kv.decode[C]));
    const Cost alone = CostModel(s, hw, Workload{100, 11, 1, Objective::Throughput}, Policy{1, 1, true, false, DType::F16})
                           .layer_kv(0, KvOption::Dram);
    CHECK(alone.decode_overlapped == 0);
}

TEST_CASE("planner: the CPU attends where copying the KV in costs more than its pass over it, the device where it "
          "costs less", "[unit][planner]") {
    // Llama-3-8B Q4_0 (4.3 GB) on a 24 GB card, 16 sequences of 16k tokens: 34 GB of KV, off the card.
    const ModelShape s = ModelShape::from_catalog("llama3-8b", DType::Q4_0);
    DryRunSpec spec;
    spec.gpu = "rtx4090";
    spec.pcie = "gen4";
    spec.cpu = "epyc-9654";
    spec.dram = 512ull << 30;
    const HardwareProfile hw = profile_from_catalog(spec);
    PlannerOptions o;
    o.budgets = default_budgets(hw);
    o.allow_recompute = false;
    // The best plan of each attention side, and which one the search chose.
    struct Choice {
        bool cpu_attention;
        double cpu_s = INFINITY, gpu_s = INFINITY;
    };
    auto choose = [&](const HardwareProfile& h) {
        const SearchResult r = search_plans(s, h, Workload{16384, 64, 16, Objective::Latency}, o);
        Choice c{r.best.policy.cpu_attention};
        for (const Plan& p : r.candidates) {
            double& best = p.policy.cpu_attention ? c.cpu_s : c.gpu_s;
            best = std::min(best, p.prediction.objective_s);
        }
        return c;
    };
    // Twelve channels of DDR5 read the KV faster than PCIe brings it in: the CPU attends, beside
    // the device's matmuls.
    const Choice server = choose(hw);
    CHECK(server.cpu_attention);
    CHECK(server.cpu_s < server.gpu_s);
    // A CPU that attends 20 times slower: copying the KV in wins, and the choice flips.
    HardwareProfile slow = hw;
    slow.cpu.attention_gbps /= 20, slow.cpu.attention_gflops /= 20;
    slow.cpu.attention_tile.reset();
    const Choice weak = choose(slow);
    CHECK_FALSE(weak.cpu_attention);
    CHECK(weak.gpu_s < weak.cpu_s);
}

TEST_CASE("cost model: the simulated device's copies take the device's time where its threads and the host's fill "
          "the cores, not where a core is left or on a GPU",
          "[unit][planner]") {
    const ModelShape s = toy_shape();
    HardwareProfile hw = toy_cpu();  // DRAM copies at 10 GB/s
    hw.gpu = GpuProfile{"toy gpu", 8ull << 30, 1000, 100, 10, 10, "", 0};
    hw.cpu.n_cores = 2, hw.cpu.n_threads = 1;
    constexpr int G = static_cast<int>(Stream::GpuCompute);
    const Workload wl{100, 11, 1, Objective::Latency};
    const Policy policy{1, 1, false, false, DType::F16};
    // What copying a 1 GB layer in (and its KV cache) adds to the device's compute over holding it there.
    auto copy_s = [&] {
        const CostModel cm(s, hw, wl, policy);
        return cm.layer_weights(0, WeightOption::DramToGpu).decode[G] - cm.layer_weights(0, WeightOption::Gpu).decode[G];
    };
    auto kv_copy_s = [&] {
        const CostModel cm(s, hw, wl, policy);
        return cm.layer_kv(0, KvOption::Dram).decode[G] - cm.layer_kv(0, KvOption::Gpu).decode[G];
    };
    CHECK(copy_s() == 0);  // a GPU's copy engine
    hw.gpu->sim_threads = 1;
    CHECK(copy_s() == Approx(1e9 / 10e9));  // memcpy at the DRAM's copy rate, on the host's second core
    const double kv_read = s.attended_positions(100 + 11 / 2.0) * s.kv_bytes_per_token(DType::F16);
    CHECK(kv_copy_s() == Approx(kv_read / 10e9));
    hw.cpu.n_cores = 4;  // a core to spare for the copies
    CHECK(copy_s() == 0);
    CHECK(kv_copy_s() == 0);
}

TEST_CASE("cost model: DRAM the runtime holds apart counts only the layers a plan keeps there", "[unit][planner]") {
    const ModelShape s = toy_shape();
    HardwareProfile hw = toy_cpu_with_gpu();
    const Workload wl{100, 11, 1, Objective::Latency};
    const Policy policy{1, 1, true, false, DType::F16};
    RuntimeLimits apart;
    apart.dram_held_apart = true;
    const CostModel counted(s, hw, wl, policy), held(s, hw, wl, policy, apart);
    // Two layers in DRAM, two read from NVMe (staged in DRAM), every KV layer, the head and the
    // hidden states in DRAM.
    Plan p;
    p.has_gpu = true, p.policy = policy;
    for (int32_t i = 0; i < 4; ++i)
        p.layers.push_back({i, i < 2 ? WeightOption::DramCpu : WeightOption::NvmeCpu, KvOption::Dram, Device::Cpu});
    p.output = WeightOption::DramCpu, p.embedding = WeightOption::DramCpu, p.hidden = HiddenOption::Dram;
    const Prediction all = counted.predict(p), layers_only = held.predict(p);
    const double layer = static_cast<double>(s.layers[0].weight_bytes);
    CHECK(layers_only.used.dram == Approx(2 * layer));
    // Counted: the head, the KV cache, the hidden states and two layers' staging besides.
    CHECK(all.used.dram >= 4 * layer + static_cast<double>(s.output_bytes));
    // Only memory differs: the plan takes as long either way, and its other tiers are the same.
    CHECK(layers_only.objective_s == Approx(all.objective_s));
    CHECK(layers_only.used.gpu == Approx(all.used.gpu));
    CHECK(layers_only.used.nvme == Approx(all.used.nvme));
}

TEST_CASE("cost model with a device attending to KV copied in: one layer's keys and values staged on the device, "
          "as the runtime stages them, whichever side attends to decode steps", "[unit][planner]") {
    // Four sequences' context in one layer, keys and values, once: the runtime's one staging pair
    // (runtime/exec/device/device_memory.cpp), reused layer after layer.
    const Workload wl{2048, 16, 4, Objective::Throughput};
    const double staged = CostModel(toy_shape(), toy_cpu_with_gpu(), wl, Policy{4, 1, false, false, DType::F16})
                              .layer_kv(0, KvOption::Dram)
                              .gpu_staging;
    CHECK(staged == Approx(4.0 * double(wl.kv_positions()) * toy_shape().kv_bytes_per_token(DType::F16)));
    // The CPU attending to decode steps: the device still stages a layer for a prompt's
    // attention, in the plan's GPU memory unless the runtime holds it in its working set.
    const Policy cpu_attends{4, 1, true, false, DType::F16};
    CHECK(CostModel(toy_shape(), toy_cpu_with_gpu(), wl, cpu_attends).layer_kv(0, KvOption::Dram).gpu_staging == Approx(staged));
    RuntimeLimits device_runtime;
    device_runtime.dram_held_apart = true;
    for (const Policy& pol : {Policy{4, 1, false, false, DType::F16}, cpu_attends})
        CHECK(CostModel(toy_shape(), toy_cpu_with_gpu(), wl, pol, device_runtime).layer_kv(0, KvOption::Dram).gpu_staging == 0);
}

TEST_CASE("cost model for the device runtime: a batch's prompt hidden states take none of the GPU budget, its working "
          "set holds a pass's", "[unit][planner]") {
    const Workload wl{8192, 8, 16, Objective::Throughput};
    const ModelShape s = toy_shape();  // the cost model keeps references to both
    const HardwareProfile hw = toy_cpu_with_gpu();
    auto hidden_gpu_bytes = [&](bool device_runtime) {
        RuntimeLimits limits;
        limits.dram_held_apart = device_runtime;
        const CostModel cm(s, hw, wl, Policy{16, 1, false, false, DType::F16}, limits);
        return cm.hidden(HiddenOption::Gpu).bytes[static_cast<size_t>(Tier::Gpu)];
    };
    CHECK(hidden_gpu_bytes(false) == Approx(16.0 * 8192 * toy_shape().n_embd * 2));  // the whole batch's prompt
    CHECK(hidden_gpu_bytes(true) == 0);
}

TEST_CASE("cost model: a prompt's working set is one pass's activations (256 rows at most), whatever the prompt's "
          "length, and one row of logits a sequence", "[unit][planner]") {
    // The toy's rows: residual, q/k/v (4 x 1024) and the feed-forward's (3 x 4096), F16.
    const double row = (4.0 * 1024 + 3.0 * 4096) * 2, logits = 1000 * 4.0;
    const ModelShape s = toy_shape();  // the cost model keeps a reference
    auto working_set = [&](const HardwareProfile& hw, int32_t prompt, int32_t batch) {
        const CostModel cm(s, hw, Workload{prompt, 8, batch, Objective::Latency},
                           Policy{batch, 1, false, false, DType::F16});
        return cm.fixed().bytes[static_cast<size_t>(hw.has_gpu() ? Tier::Gpu : Tier::Dram)];
    };
    for (const HardwareProfile& hw : {toy_cpu(), toy_cpu_with_gpu()}) {
        CHECK(working_set(hw, 100, 1) == Approx(100 * row + logits));
        CHECK(working_set(hw, 100000, 1) == Approx(256 * row + logits));
        CHECK(working_set(hw, 100, 4) == Approx(256 * row + 4 * logits));  // 400 rows, in passes of 256
    }
}
