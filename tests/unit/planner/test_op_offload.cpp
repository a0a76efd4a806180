// The planner's price of op offload (planner/op_offload.h), worked out by hand on a toy model:
// the pass's row count at which copying the CPU layers to the device starts to beat computing
// them where they lie.
#include <catch2/catch.hpp>

#include "planner/cost_model.h"
#include "planner/expert_placement.h"
#include "planner/op_offload.h"
#include "tests/support/toy_hardware.h"
#include "tests/support/toy_moe.h"
#include "tests/support/toy_shape.h"

using namespace strata;
using namespace strata::planner;
using strata::test::toy_moe;
using strata::test::toy_moe_plan;
using strata::test::toy_op_offload_machine;
using strata::test::toy_shape;

namespace {

// Layers 1 and 2 at `cpu` (their matmuls on the CPU), 0 and 3 on the device.
Plan toy_plan(WeightOption cpu) {
    Plan p;
    p.has_gpu = true;
    p.n_layer = 4;
    p.workload = Workload{512, 128, 1, Objective::Latency};
    for (int32_t il = 0; il < 4; ++il) {
        const bool on_cpu = il == 1 || il == 2;
        p.layers.push_back({il, on_cpu ? cpu : WeightOption::Gpu, KvOption::Gpu, on_cpu ? Device::Cpu : Device::Gpu});
    }
    return p;
}

}  // namespace

TEST_CASE("op offload: the device takes the CPU layers from the row count where their copy costs less than their compute",
          "[unit][planner]") {
    const ModelShape s = toy_shape();
    const HardwareProfile hw = toy_op_offload_machine(10);
    const Plan plan = toy_plan(WeightOption::DramCpu);
    // CPU: per layer the larger of n x 1e9 flops at 100 GFLOPS and 1 GB at 10 GB/s: 0.2 s for
    // the two up to 10 rows, 0.02 s a row beyond. Device: the first copy (1 GB at 10 GB/s, 0.1 s),
    // then per layer the longer of its compute (1 ms over the weights; per row 8 KiB of f32 K and
    // V down into the host's cache, 4 KiB of its f16 rows back up) and the next copy:
    // 0.2 s + 1 ms + n x 1.2288 us.
    const OpOffloadPrice at10 = price_op_offload(s, hw, plan, 10);
    CHECK(at10.cpu_s == Approx(0.2));
    CHECK(at10.device_s == Approx(0.201 + 10 * 12288e-10));
    const OpOffloadPrice at11 = price_op_offload(s, hw, plan, 11);
    CHECK(at11.cpu_s == Approx(0.22));
    CHECK(at11.device_s < at11.cpu_s);
    CHECK(at10.device_s > at10.cpu_s);

    const OpOffload o = choose_op_offload(s, hw, plan, 256);
    REQUIRE(o.runs == std::vector<LayerSpan>{{1, 2}});
    CHECK(format_runs(o.runs) == "1-2");
    CHECK(o.min_rows == 11);
    // Every pass from there up to the largest is priced faster on the device.
    for (int32_t rows : {11, 12, 64, 256}) {
        const OpOffloadPrice p = price_op_offload(s, hw, plan, rows);
        CHECK(p.device_s < p.cpu_s);
    }
    // The plan's 512-token prompt in two passes of 256 rows: each saves 5.12 s less the device's.
    // The second pass's attention copies up the first's 256 rows of K/V too (4 KiB each at 10
    // GB/s), which only its first CPU layer waits for: the next one's copy takes longer.
    const OpOffloadPrice at256 = price_op_offload(s, hw, plan, 256), second = price_op_offload(s, hw, plan, 256, 256);
    CHECK(second.device_s - at256.device_s == Approx(256 * 4096 / 10e9));
    const double saved = (at256.cpu_s - at256.device_s) + (second.cpu_s - second.device_s);
    CHECK(op_offload_saving_s(s, hw, plan, 512, 256, o.min_rows) == Approx(saved));
    CHECK(o.ttft_s == Approx(plan.prediction.ttft_s - saved));
    // A pass shorter than the chosen rows saves nothing.
    CHECK(op_offload_saving_s(s, hw, plan, 10, 256, o.min_rows) == 0);
}

TEST_CASE("op offload: a faster link lowers the row count, a slower one raises it", "[unit][planner]") {
    const ModelShape s = toy_shape();
    const Plan plan = toy_plan(WeightOption::DramCpu);
    // At 2.5 GB/s a layer's copy takes 0.4 s: the device's 0.8 s + 1 ms + n x 4.9152 us beats the
    // CPU's 0.02 s a row from 41 rows.
    CHECK(choose_op_offload(s, toy_op_offload_machine(2.5), plan, 256).min_rows == 41);
    // At 100 GB/s (10 ms a copy) the device wins at a single row, but a pass of up to 4 rows is
    // decode to the runtime: from 5.
    const OpOffloadPrice one_row = price_op_offload(s, toy_op_offload_machine(100), plan, 1);
    CHECK(one_row.device_s < one_row.cpu_s);
    CHECK(choose_op_offload(s, toy_op_offload_machine(100), plan, 256).min_rows == 5);
    // At 0.05 GB/s (20 s a copy) no pass up to 256 rows pays for it.
    CHECK(choose_op_offload(s, toy_op_offload_machine(0.05), plan, 256).min_rows == 0);
}

TEST_CASE("op offload: the device's copies of streamed CPU layers are read from the disk, of layers in DRAM rebuilt there",
          "[unit][planner]") {
    const ModelShape s = toy_shape();
    // 1 GB a layer at 2 GB/s from the disk: the device's copies of two streamed layers take at
    // least 1 s, more than the 0.2 s over the link: the CPU's 0.02 s a row must pass 1 s, from 51
    // rows.
    const Plan streamed = toy_plan(WeightOption::NvmeCpu);
    const OpOffloadPrice at50 = price_op_offload(s, toy_op_offload_machine(10, 2), streamed, 50);
    CHECK(at50.cpu_s == Approx(1.0));
    CHECK(at50.device_s == Approx(1.0));
    CHECK(choose_op_offload(s, toy_op_offload_machine(10, 2), streamed, 256).min_rows == 51);
    // At 0.2 GB/s (10 s of reads) no pass up to 256 rows (5.12 s on the CPU) pays: the choice flips to off,
    // and the prompt's first token is predicted as without op offload.
    const OpOffload slow = choose_op_offload(s, toy_op_offload_machine(10, 0.2), streamed, 256);
    CHECK(slow.min_rows == 0);
    CHECK(slow.ttft_s == streamed.prediction.ttft_s);

    // Layers in DRAM are rebuilt from the CPU's tiles, not read: the disk does not matter (11 rows, as the first case).
    const Plan in_dram = toy_plan(WeightOption::DramCpu);
    CHECK(choose_op_offload(s, toy_op_offload_machine(10, 0.2), in_dram, 256).min_rows == 11);
    // A layer's copy goes as it is rebuilt: rebuilt at 10 GB/s, as fast as the link, it costs
    // nothing more; at 5 GB/s (0.2 s a layer) the rebuild is what each layer waits for: the
    // device's 0.2 s + 1 ms + 0.2 s + n x 1.2288 us beats the CPU's 0.02 s a row from 21 rows.
    CHECK(choose_op_offload(s, toy_op_offload_machine(10, 1e6, 10), in_dram, 256).min_rows == 11);
    const OpOffloadPrice at20 = price_op_offload(s, toy_op_offload_machine(10, 1e6, 5), in_dram, 20);
    CHECK(at20.device_s == Approx(0.401 + 20 * 12288e-10));
    CHECK(choose_op_offload(s, toy_op_offload_machine(10, 1e6, 5), in_dram, 256).min_rows == 21);
    // At 1 GB/s: 1 s a layer, 2 s + 1 ms for the two, from 101 rows.
    CHECK(choose_op_offload(s, toy_op_offload_machine(10, 1e6, 1), in_dram, 256).min_rows == 101);
    // Without a measured rate (tiles the CPU cannot give back, a catalog CPU, an older profile)
    // they are priced read from the file, as the runtime then reads them: from 51 rows at 2 GB/s.
    CHECK(choose_op_offload(s, toy_op_offload_machine(10, 2, 0), in_dram, 256).min_rows == 51);
}

TEST_CASE("op offload: nothing to choose without CPU layers or a device", "[unit][planner]") {
    const ModelShape s = toy_shape();
    Plan all_on_device = toy_plan(WeightOption::Gpu);
    const OpOffload o = choose_op_offload(s, toy_op_offload_machine(10), all_on_device, 256);
    CHECK(o.runs.empty());
    CHECK(o.min_rows == 0);
    const OpOffload cpu_only = choose_op_offload(s, test::toy_cpu(), toy_plan(WeightOption::DramCpu), 256);
    CHECK(cpu_only.runs.empty());
    CHECK(cpu_only.min_rows == 0);
}

TEST_CASE("cost model: with op offload, a CPU layer's prompt pass is priced where it runs quicker, its decode where it lies",
          "[unit][planner]") {
    const ModelShape s = toy_shape();
    const HardwareProfile hw = toy_op_offload_machine(10, 5, 10);
    constexpr int C = static_cast<int>(Stream::CpuCompute), G = static_cast<int>(Stream::GpuCompute),
                  H = static_cast<int>(Stream::PcieH2D), N = static_cast<int>(Stream::Nvme);
    auto layer = [&](int32_t prompt, bool op_offload, int32_t kv_latent = 0, WeightOption at = WeightOption::DramCpu) {
        ModelShape m = s;
        m.kv_latent = kv_latent;
        RuntimeLimits limits;
        limits.op_offload = op_offload;
        return CostModel(m, hw, Workload{prompt, 128, 1, Objective::Latency}, Policy{1, 1, true, false, DType::F16}, limits)
            .layer_weights(1, at);
    };
    // 512 rows: 5.12 s on the CPU (1e9 flops a row at 100 GFLOPS); in two passes of 256 rows,
    // each rebuilt from the CPU's tiles at 10 GB/s (0.1 s) and copied at 10 GB/s as it is
    // rebuilt (0.1 s), then computed on the device.
    const Cost plain = layer(512, false), offloaded = layer(512, true);
    CHECK(plain.prefill[C] == Approx(5.12));
    CHECK(offloaded.prefill[C] == 0);  // the CPU's threads rebuild it while the device computes
    CHECK(offloaded.prefill[N] == 0);
    CHECK(offloaded.prefill[H] == Approx(2 * 0.1));
    // Rebuilt at 5 GB/s, its copy goes no faster than that: 0.2 s a pass.
    RuntimeLimits limits;
    limits.op_offload = true;
    const CostModel slow_rebuild(s, toy_op_offload_machine(10, 5, 5), Workload{512, 128, 1, Objective::Latency},
                                 Policy{1, 1, true, false, DType::F16}, limits);
    CHECK(slow_rebuild.layer_weights(1, WeightOption::DramCpu).prefill[H] == Approx(2 * 0.2));
    CHECK(offloaded.prefill[G] > 0);
    CHECK(offloaded.decode == plain.decode);  // decode stays on the CPU
    CHECK(offloaded.bytes == plain.bytes);    // and the layer where it lies
    // Streamed from the disk: read at 5 GB/s (0.2 s) and copied (0.1 s) each pass, nothing for the CPU.
    const Cost streamed = layer(512, true, 0, WeightOption::NvmeCpu);
    CHECK(streamed.prefill[C] == 0);
    CHECK(streamed.prefill[N] == Approx(2 * 0.2));
    CHECK(streamed.prefill[H] == Approx(2 * 0.1));
    // A short prompt is quicker on the CPU (0.1 s against the 0.2 s copy); latent attention's
    // long one, as any layer's, on the device.
    CHECK(layer(10, true).prefill == layer(10, false).prefill);
    CHECK(layer(512, true, 64).prefill[C] == 0);
    CHECK(layer(512, false, 64).prefill[C] > 0);
}

TEST_CASE("cost model: a run of CPU layers whose prompt passes op offload moves to the device prices no hop "
          "it does not make",
          "[unit][planner]") {
    const ModelShape s = toy_shape();
    const HardwareProfile hw = toy_op_offload_machine(10, 5);
    constexpr int H = static_cast<int>(Stream::PcieH2D), D = static_cast<int>(Stream::PcieD2H);
    auto total = [&](bool op_offload) {
        RuntimeLimits limits;
        limits.op_offload = op_offload;
        return CostModel(s, hw, Workload{512, 128, 1, Objective::Latency}, Policy{1, 1, false, false, DType::F16}, limits)
            .total_cost(toy_plan(WeightOption::DramCpu));
    };
    const Cost plain = total(false), offloaded = total(true);
    // Layers 1 and 2 run on the CPU: without op offload their prompt pass hops down and up once.
    for (int stream : {H, D}) {
        CHECK(plain.prefill[stream] > 0);
        CHECK(offloaded.prefill[stream] >= 0);  // the prompt pass stays on the device: no hop to take back
        CHECK(offloaded.decode[stream] == Approx(plain.decode[stream]));
    }
    CHECK(offloaded.prefill_overhead >= 0);
}

TEST_CASE("op offload of a mixture of experts: a long pass copies the layers whose experts are in DRAM and computes "
          "every routed expert on the device",
          "[unit][planner][experts]") {
    const ModelShape s = toy_moe();
    const HardwareProfile hw = toy_op_offload_machine(10);
    const Plan plan = toy_moe_plan(s, hw, false);
    REQUIRE(plan.experts.attention_on_gpu);
    CHECK(op_offload_layer_runs(s, plan) == std::vector<LayerSpan>{{0, 3}});
    // Copied in: each 1 GB layer at 10 GB/s, 0.1 s, then computed: the device reads the experts
    // the pass chose (up to 960 MB at 1000 GB/s, about 1 ms) and computes them at 100 TFLOPS,
    // while the host makes the next layer's copy: 0.4 s and a little for four.
    const OpOffloadPrice one = price_op_offload(s, hw, plan, 1);
    CHECK(one.device_s == Approx(0.4).epsilon(0.02));
    // On the CPU a row's two chosen experts read 480 MB at 10 GB/s: 0.048 s a layer.
    CHECK(one.cpu_s == Approx(4 * 0.048).epsilon(0.02));
    CHECK(one.cpu_s < one.device_s);
    // 256 rows choose every expert: 256 x 2 x 1.2e8 x 2 flops at 100 GFLOPS, 1.23 s a layer.
    const OpOffloadPrice full = price_op_offload(s, hw, plan, 256);
    CHECK(full.cpu_s == Approx(4 * 1.2288).epsilon(0.02));
    CHECK(full.device_s == Approx(0.4).epsilon(0.02));
    // A row costs the CPU 4.8 ms a layer (past the 10th, beyond its weights' read), the device
    // 0.1 s a layer and its ~1 ms of reading every expert, which but for the last layer's the
    // copy of the next hides: 20 rows (96 ms) are not yet more than 100 ms, 21 (100.8 ms) are.
    const OpOffload chosen = choose_op_offload(s, hw, plan, 256);
    CHECK(chosen.min_rows == 21);
    CHECK(chosen.ttft_s < plan.prediction.ttft_s);
    // Layers whose experts come through the expert cache are not copied: their copy would read
    // every expert from the disk.
    CHECK(op_offload_layer_runs(s, toy_moe_plan(s, hw, true)) == std::vector<LayerSpan>{{0, 1}});
}

TEST_CASE("op offload of a mixture of experts: the host makes a layer's copy while the device computes the experts "
          "of the layer before",
          "[unit][planner][experts]") {
    const ModelShape s = toy_moe();
    HardwareProfile hw = toy_op_offload_machine(10);
    hw.gpu->fp16_tflops = 1;  // the experts' compute as long as the copy
    const Plan plan = toy_moe_plan(s, hw, false);
    REQUIRE(op_offload_layer_runs(s, plan) == std::vector<LayerSpan>{{0, 3}});
    // Per layer at 1 TFLOPS: attention's 2e7 parameters, 256 x 4e7 flops, 10.2 ms; the routed
    // experts' 256 x 2 rows, 122.9 ms, in one fill of the device's scratch (a pass's every
    // choice). Each copy (0.1 s) but the first is made while the host waits for the experts of
    // the layer before, which hide it (the toy's host has no work of its own there: its dense
    // weights are all attention's): 0.1 + 4 x 133.1 ms = 0.632 s (0.932 one after the other).
    CHECK(price_op_offload(s, hw, plan, 256).device_s == Approx(0.632).epsilon(0.03));
    // 64 rows: attention 2.6 ms, the experts 30.7 ms, all of which the next copy waits out:
    // 0.1 + 4 x 33.3 ms + 3 x 69.3 ms = 0.441 s (0.533 one after the other).
    CHECK(price_op_offload(s, hw, plan, 64).device_s == Approx(0.441).epsilon(0.03));
    // Layer 0's experts all held on the device: it is not copied, and layer 1's copy is made
    // while the host waits for layer 0's experts as it would for a copied layer's: 3 x 133.1 ms
    // = 0.399 s (0.499 with layer 1's copy whole).
    Plan held = plan;
    held.experts.device.resize(4);
    held.experts.device_share.resize(4, 0.0);
    held.experts.device[0] = {0, 1, 2, 3};
    held.experts.device_share[0] = 1.0;
    REQUIRE(op_offload_layer_runs(s, held) == std::vector<LayerSpan>{{1, 3}});
    CHECK(price_op_offload(s, hw, held, 256).device_s == Approx(0.399).epsilon(0.03));
    // 16 experts of 3e7 parameters, 12 chosen a token: a pass's 3072 choices outgrow the
    // scratch's 2048 rows (kDeviceExpertRows), two fills of 92.2 ms of the experts' 184.3 ms,
    // and each copy but the first waits out the first fill only: 7.8 ms of it left. Per layer
    // 10.2 + 184.3 ms and the rows' hops (3072 rows of 4 KiB each way at 10 GB/s, 1.3 ms each):
    // 0.1 + 4 x 197.1 ms + 3 x 7.8 ms = 0.912 s.
    ModelShape many = s;
    many.n_expert = 16, many.n_expert_used = 12;
    const Plan plan_many = toy_moe_plan(many, hw, false);
    REQUIRE(op_offload_layer_runs(many, plan_many) == std::vector<LayerSpan>{{0, 3}});
    CHECK(price_op_offload(many, hw, plan_many, 256).device_s == Approx(0.912).epsilon(0.03));
}

TEST_CASE("op offload of a mixture of experts: strata plan gives its two slots the room of held experts only where the "
          "workload's prompt gains more than its decode loses",
          "[unit][planner][experts]") {
    const ModelShape s = toy_moe();
    const HardwareProfile hw = toy_op_offload_machine(10);
    PlannerOptions opts;
    opts.budgets = {3.5e9, 64e9, 1e12};  // room for a dozen experts of 240 MB beside the attention
    opts.limits.op_offload = true;
    auto plan_for = [&](const Workload& wl) { return search_with_expert_offload(s, hw, wl, opts).best; };
    // A long prompt and a few tokens: 16 passes of 256 rows, each near a second a layer on the CPU
    // for the experts the device does not hold, against 0.4 s copied in; two slots (2 GB) cost
    // held experts.
    const Plan prompt = plan_for(Workload{4096, 16, 1, Objective::Latency});
    // A short prompt and many tokens: the experts held save each token more.
    const Plan decode = plan_for(Workload{300, 1000, 1, Objective::Latency});
    REQUIRE(prompt.experts.attention_on_gpu);
    REQUIRE(decode.experts.attention_on_gpu);
    CHECK(prompt.experts.op_offload_rows > 0);
    CHECK(decode.experts.op_offload_rows == 0);
    // (2 GB hold 8.3 experts' room: 8 or 9 fewer, by where the rest of the room falls.)
    const int32_t fewer = decode.experts.n_device() - prompt.experts.n_device();
    CHECK((fewer == 8 || fewer == 9));
    CHECK_THAT(expert_line(prompt.experts), Catch::Contains("rows copy the layers whose experts are in DRAM to the GPU"));
    CHECK(Plan::from_json(prompt.to_json()) == prompt);
    // From the rows op offload starts to pay beside the experts held; its slots in the GPU's use,
    // and the experts' scratch as the runtime takes it: a pass's 512 choices of an expert's input,
    // gate, up and output rows (1024 and 39062.5 floats wide), 164 MB.
    CHECK(prompt.experts.op_offload_rows == choose_op_offload(s, hw, prompt, 256).min_rows);
    const double scratch = 512 * (2 * 1024 + 2 * 4.8e8 / (3 * 1024 * 4)) * 4;
    CHECK(prompt.prediction.used.gpu == Approx(evaluate_plan(s, hw, prompt.workload, prompt).used.gpu + 2e9 + scratch));
    CHECK(decode.prediction.used.gpu == Approx(evaluate_plan(s, hw, decode.workload, decode).used.gpu + scratch));
    CHECK(decode.prediction.used.gpu <= opts.budgets.gpu);
    // Searched again to decode no slower than a bound between the two plans' decode steps: the
    // experts held in the slots' room; within a bound the plan with them meets, the slots stay.
    const Plan held_all = [&] {
        PlannerOptions off = opts;
        off.limits.op_offload = false;
        return search_with_expert_offload(s, hw, Workload{4096, 16, 1, Objective::Latency}, off).best;
    }();
    REQUIRE(prompt.prediction.decode.time_s > held_all.prediction.decode.time_s);
    opts.max_decode_step_s = (prompt.prediction.decode.time_s + held_all.prediction.decode.time_s) / 2;
    const Plan bounded = plan_for(Workload{4096, 16, 1, Objective::Latency});
    CHECK(bounded.experts.op_offload_rows == 0);
    CHECK(bounded.experts.n_device() == held_all.experts.n_device());
    opts.max_decode_step_s = prompt.prediction.decode.time_s * 1.01;
    CHECK(plan_for(Workload{4096, 16, 1, Objective::Latency}).experts.op_offload_rows == prompt.experts.op_offload_rows);
    opts.max_decode_step_s = 0;
    // No room in DRAM for the host's rebuild buffer of a layer (1 GB): no slots.
    opts.budgets.dram = prompt.prediction.used.dram + 0.5e9;
    CHECK(plan_for(Workload{4096, 16, 1, Objective::Latency}).experts.op_offload_rows == 0);
    opts.budgets.dram = 64e9;
    // Without op offload in the runtime, no slots.
    opts.limits.op_offload = false;
    CHECK(plan_for(Workload{4096, 16, 1, Objective::Latency}).experts.op_offload_rows == 0);
}
