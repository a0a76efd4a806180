// A prompt runs in passes of up to ModelShape::kPassRows rows (the runtime's Backend::kMaxUbatch),
// and each pass goes over the weights it uses again: a layer copied in is copied, one streamed
// from the disk is read, the CPU's weights are passed over, once a pass. Hand-computed on the
// toy model (1 GB layers of 5e8 parameters) and the toy machine (tests/support/toy_hardware.h).
#include <catch2/catch.hpp>

#include <cmath>

#include "planner/cost_model.h"
#include "planner/op_offload.h"
#include "tests/support/toy_hardware.h"
#include "tests/support/toy_moe.h"

using namespace strata;
using namespace strata::planner;

namespace {
constexpr int G = static_cast<int>(Stream::GpuCompute), C = static_cast<int>(Stream::CpuCompute),
              H = static_cast<int>(Stream::PcieH2D), D = static_cast<int>(Stream::PcieD2H), N = static_cast<int>(Stream::Nvme);

CostModel model(const ModelShape& s, const HardwareProfile& hw, int prompt, int batch = 1) {
    return CostModel(s, hw, Workload{prompt, 16, batch, Objective::Latency}, Policy{batch, 1, true, false, DType::F16});
}
}  // namespace

TEST_CASE("cost model: each of a prompt's passes of 256 rows copies, streams and passes over the weights again",
          "[unit][planner]") {
    const ModelShape s = test::toy_shape();
    const HardwareProfile hw = test::toy_cpu_with_gpu();  // a 10 GB/s link, a 2 GB/s disk
    for (const int prompt : {1, 256, 257, 1000, 1024}) {
        INFO("prompt " << prompt);
        const double passes = std::ceil(prompt / 256.0);
        const CostModel cm = model(s, hw, prompt);
        // A layer copied in from DRAM: 1 GB over the link, 0.1 s a pass.
        CHECK(cm.layer_weights(0, WeightOption::DramToGpu).prefill[H] == Approx(passes * 0.1));
        // Streamed from the disk to the device: 0.5 s of reading a pass.
        CHECK(cm.layer_weights(0, WeightOption::NvmeToGpu).prefill[N] == Approx(passes * 0.5));
        // On the CPU from the disk too; its arithmetic is the prompt's (1e9 flops a token at 100
        // GFLOPS), past a pass's read of its weights (0.1 s at 10 GB/s: 10 rows).
        const Cost cpu = cm.layer_weights(0, WeightOption::NvmeCpu);
        CHECK(cpu.prefill[N] == Approx(passes * 0.5));
        CHECK(cpu.prefill[C] == Approx(prompt > 10 ? prompt * 0.01 : 0.1));
    }
    // A batch's prompts share passes: 4 sequences of 100 rows are two passes, not four.
    CHECK(model(s, hw, 100, 4).layer_weights(0, WeightOption::DramToGpu).prefill[H] == Approx(0.2));
}

TEST_CASE("cost model: the CPU's pass over its weights, where measured, is paid once a prompt pass", "[unit][planner]") {
    const ModelShape s = test::toy_shape();
    HardwareProfile hw = test::toy_cpu();
    KernelRate f16{DType::F16, hw.cpu.gemv_gbps, hw.cpu.gemm_gflops};
    f16.pack_gbps = 5;  // a many-row call passes over 1 GB in 0.2 s
    hw.cpu.rates.push_back(f16);
    const double one = model(s, hw, 256).layer_weights(0, WeightOption::DramCpu).prefill[C];
    const double four = model(s, hw, 1024).layer_weights(0, WeightOption::DramCpu).prefill[C];
    // 4x the arithmetic and 4x the passes over the weights: the same per row.
    CHECK(four == Approx(4 * one));
    CHECK(one - 256 * 0.01 == Approx(0.2).epsilon(0.05));
}

TEST_CASE("op offload of a mixture of experts: a prompt's TTFT with op offload counts each pass's work on both sides",
          "[unit][planner][experts]") {
    // The host passes over its experts once a pass: the saving of 16 passes is 16 passes' worth,
    // and the first token's time with it stays above the device's side of those passes.
    const ModelShape s = test::toy_moe();
    HardwareProfile hw = test::toy_op_offload_machine(10);
    for (KernelRate& r : hw.cpu.rates) r.pack_gbps = 5;
    const Workload wl{4096, 16, 1, Objective::Latency};
    Plan plan = test::toy_moe_plan(s, hw, false, wl);
    const OpOffload o = choose_op_offload(s, hw, plan, 256);
    REQUIRE(o.min_rows > 0);
    const double saved = op_offload_saving_s(s, hw, plan, 4096, 256, o.min_rows);
    const OpOffloadPrice pass = price_op_offload(s, hw, plan, 256);
    CHECK(saved == Approx(16 * (pass.cpu_s - pass.device_s)));
    CHECK(plan.prediction.ttft_s - saved > 16 * pass.device_s * 0.99);
}

TEST_CASE("op offload of a mixture of experts: a layer the CPU cannot rebuild is read from the disk before it is copied",
          "[unit][planner][experts]") {
    const ModelShape s = test::toy_moe();
    // No rebuild rate: each 1 GB layer is read from a 2 GB/s disk (0.5 s) before its 0.1 s on the link.
    const HardwareProfile slow_disk = test::toy_op_offload_machine(10, 2, 0);
    const HardwareProfile fast = test::toy_op_offload_machine(10);
    const Plan plan = test::toy_moe_plan(s, fast, false);
    const double read = price_op_offload(s, slow_disk, plan, 256).device_s, rebuilt = price_op_offload(s, fast, plan, 256).device_s;
    CHECK(read - rebuilt == Approx(4 * (0.5 - 0.1)).epsilon(0.01));
}

TEST_CASE("cost model: the output head runs in the passes holding a sequence's last row, micro-batches share a pass's "
          "copy, and a pass with its KV cache in DRAM copies up the rows it attends to, whichever side attends to decode",
          "[unit][planner]") {
    const ModelShape s = test::toy_shape();
    const HardwareProfile hw = test::toy_cpu_with_gpu();  // a 10 GB/s link
    // The head (2 MB) copied in once for one sequence's 4096 rows; twice for 4 sequences of 100
    // rows in two passes.
    CHECK(model(s, hw, 4096).output(WeightOption::DramToGpu).prefill[H] == Approx(2e6 / 10e9));
    CHECK(model(s, hw, 100, 4).output(WeightOption::DramToGpu).prefill[H] == Approx(2 * 2e6 / 10e9));
    // 4 micro-batches of one 256-row prompt each: one copy of a layer serves them all (as a decode
    // step's does); their arithmetic is each one's.
    const CostModel micro(s, hw, Workload{256, 16, 4, Objective::Latency}, Policy{4, 4, true, false, DType::F16});
    CHECK(micro.layer_weights(0, WeightOption::DramToGpu).prefill[H] == Approx(0.1));
    // The device attending to a prompt whose KV cache is in DRAM: pass k copies up the k * 256
    // rows so far, 4 KiB a row: 256 x (1 + 2 + 3 + 4) rows for 1024.
    const CostModel gpu_attends(s, hw, Workload{1024, 16, 1, Objective::Latency}, Policy{1, 1, false, false, DType::F16});
    REQUIRE(gpu_attends.attention_device(KvOption::Dram) == Device::Gpu);
    const double h2d = gpu_attends.layer_kv(0, KvOption::Dram).prefill[H];
    CHECK(h2d == Approx(256.0 * 10 * 4096 / 10e9));
    // 300 rows: 256, then all 300.
    const CostModel short_last(s, hw, Workload{300, 16, 1, Objective::Latency}, Policy{1, 1, false, false, DType::F16});
    CHECK(short_last.layer_kv(0, KvOption::Dram).prefill[H] == Approx((256.0 + 300) * 4096 / 10e9));
    // The CPU attending to decode steps: the device still attends to a prompt's passes of its
    // layers, over the same rows copied up (the device runtime's HostCpuAttention, and a mixture
    // of experts' attention on the device with its KV cache in DRAM).
    const CostModel cpu_attends(s, hw, Workload{1024, 16, 1, Objective::Latency}, Policy{1, 1, true, false, DType::F16});
    REQUIRE(cpu_attends.attention_device(KvOption::Dram) == Device::Cpu);
    CHECK(cpu_attends.layer_kv(0, KvOption::Dram).prefill[H] == Approx(h2d));
    // A layer the CPU computes beside the device attends there, prompts too: no KV copied up
    // (the link carries its hidden states' hop alone).
    Plan plan;
    plan.layers.assign(size_t(s.n_layer), {});
    const LayerPlacement on_cpu{0, WeightOption::DramCpu, KvOption::Dram, Device::Cpu};
    for (const CostModel* cm : {&gpu_attends, &cpu_attends})
        CHECK(cm->placed_layer(plan, on_cpu).prefill[H] == Approx(cm->layer_weights(0, WeightOption::DramCpu).prefill[H]));
    // The prompt's new keys and values come down as floats, which the host stores as F16: 1024
    // rows of 2 x 1024 floats.
    for (const CostModel* cm : {&gpu_attends, &cpu_attends})
        CHECK(cm->layer_kv(0, KvOption::Dram).prefill[D] == Approx(1024.0 * 2 * 1024 * 4 / 10e9));
    // Hidden states kept in DRAM go through the device a pass's rows at a time: its staging holds
    // 256 rows in and out (F16 of 1024 values), not the prompt's.
    CHECK(model(s, hw, 4096).hidden(HiddenOption::Dram).gpu_staging == Approx(2.0 * 256 * 1024 * 2));
}
