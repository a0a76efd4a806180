// A device the command did not name (--device auto) is used only where the plan made beside it
// is predicted to decode faster than the CPU alone's; a device --device names is used anyway.
// Priced on this machine's cached profile (never timed here): the simulated device on one of two
// threads against the CPU alone, then the same layout with a device far faster than the CPU; and
// the choice made for the batch the command runs (one sequence on the CPU, 32 on the device).
#include <algorithm>
#include <filesystem>

#include <catch2/catch.hpp>

#include "models/gguf_file.h"
#include "models/hparams.h"
#include "planner/policy_search.h"
#include "runtime/place/run_layout.h"
#include "runtime/weights/weight_store.h"
#include "storage/budget.h"
#include "tests/support/model_paths.h"

using namespace strata;
using namespace strata::runtime;

namespace {
// The model's file and hyperparameters, and an unlimited DRAM budget.
struct Opened {
    explicit Opened(const std::filesystem::path& path) : file(models::GgufFile::open(path)), hp(models::Hparams::from_gguf(file)) {}
    models::GgufFile file;
    models::Hparams hp;
    storage::MemoryBudget dram{"DRAM", UINT64_MAX, "--dram"};
};

// The simulated device on one thread with 1 GiB, as `--device sim --gpu-mem 1G` finds it.
GpuTarget simulated_device(const models::GgufFile& file, const models::Hparams& hp) {
    GpuRequest req;
    req.device = DeviceKind::Sim;
    req.gpu_mem = 1ull << 30;
    req.sim_threads = 1;
    return find_gpu(req, file, hp, DType::F16, 1);
}

// The same target priced as a device that reads its weights at `gbps`, computes at 1000 TFLOPS,
// copies at 1000 GB/s and launches for nothing.
void price_as_device_reading_at(GpuTarget& t, double gbps) {
    t.hw.gpu->ops.reset();
    t.hw.gpu->sim_threads = 0;
    t.hw.gpu->mem_gbps = gbps;
    t.hw.gpu->fp16_tflops = 1000;
    t.hw.gpu->h2d_gbps = t.hw.gpu->d2h_gbps = 1000;
    t.hw.gpu->launch_overhead_us = t.hw.gpu->handoff_us = 0;
}
}  // namespace

TEST_CASE("a device the command did not name runs only where its plan beats the CPU alone's", "[model][device]") {
    auto path = test::default_model_path();
    STRATA_REQUIRE_MODEL(path, "SmolLM2-135M-Instruct.Q4_1.gguf");
    Opened model(*path);
    auto& [file, hp, dram] = model;
    const KvSize kv = kv_size(hp, 0, 512, DType::F16, nullptr);
    const ResidencyInput in = WeightStore::residency_input(file, hp, dram, kv.all_bytes, 2);
    PlacementOptions po;
    po.n_ctx = 512;
    po.n_predict = 16;
    po.kv_type = DType::F16;
    po.n_threads = 1;
    LayoutOptions lo;
    DeviceFootprint device;
    device.working_streamed = 64ull << 20;
    GpuTarget sim = simulated_device(file, hp);
    REQUIRE(sim.use);
    CHECK(sim.chosen);

    // Whichever wins, the layout says so and carries the other's figure.
    auto weigh = [&](const GpuTarget& t) {
        RunLayout out = lay_out(file, hp, in, po, lo, kv, dram, t, &device);
        REQUIRE(out.placement);
        return out;
    };
    GpuTarget unnamed = sim;
    unnamed.chosen = false;
    const RunLayout named_run = weigh(sim);
    CHECK_FALSE(named_run.cpu_alone_wins);  // named: used whatever the prediction
    REQUIRE(named_run.placement->alternative);
    CHECK(named_run.placement->alternative->what == "the CPU alone");
    const planner::Prediction& cpu_alone = named_run.placement->alternative->prediction;
    const double sim_tps = named_run.placement->plan.prediction.decode_tps_per_seq;
    CHECK(cpu_alone.decode_tps_per_seq > 0);
    const RunLayout auto_run = weigh(unnamed);
    CHECK(auto_run.cpu_alone_wins == !planner::device_beats_cpu(named_run.placement->plan.prediction, cpu_alone));
    if (auto_run.cpu_alone_wins) CHECK(auto_run.device_prediction->decode_tps_per_seq == Approx(sim_tps));

    // A device a hundred times the CPU's bandwidth, launching for nothing: its plan wins.
    GpuTarget fast = unnamed;
    price_as_device_reading_at(fast, 100 * fast.hw.cpu.gemv_gbps_for(DType::Q4_1));
    const RunLayout fast_run = weigh(fast);
    CHECK_FALSE(fast_run.cpu_alone_wins);
    REQUIRE(fast_run.placement->alternative);
    CHECK(fast_run.placement->plan.prediction.decode_tps_per_seq > fast_run.placement->alternative->prediction.decode_tps_per_seq);
}

TEST_CASE("the device-or-CPU choice is made for the batch the command runs", "[model][device]") {
    auto path = test::default_model_path();
    STRATA_REQUIRE_MODEL(path, "SmolLM2-135M-Instruct.Q4_1.gguf");
    Opened model(*path);
    auto& [file, hp, dram] = model;
    // A device that reads weights slower than the CPU alone, with compute to spare: one
    // sequence's decode, bound by reading the weights, is the CPU's; a batch of 32 makes the
    // CPU's matmuls compute-bound, where the device wins by far.
    GpuTarget even = simulated_device(file, hp);
    REQUIRE(even.use);
    even.chosen = false;
    DeviceFootprint device;
    device.working_streamed = 64ull << 20;
    auto lay_out_for = [&](int batch, const GpuTarget& gpu) {
        constexpr int kCtx = 512;
        const KvSize kv = kv_size(hp, batch * kCtx, kCtx, DType::F16, nullptr);
        const ResidencyInput in = WeightStore::residency_input(file, hp, dram, kv.all_bytes, 2);
        PlacementOptions po;
        po.n_ctx = kCtx, po.n_predict = 16, po.n_prompt = 64;
        po.n_batch = batch, po.kv_positions = batch * kCtx;
        po.kv_type = DType::F16;
        po.n_threads = po.n_threads_alone = 1;
        // The device attends too: the CPU attending 32 sequences on the one thread it leaves the
        // host would be the device plan's bottleneck, and the choice the probe's attention rate's.
        LayoutOptions lo;
        lo.attention = AttentionChoice::Gpu;
        return lay_out(file, hp, in, po, lo, kv, dram, gpu, gpu.use ? &device : nullptr);
    };
    // The device reads the weights at 0.8 of the rate the CPU alone's one-sequence plan reads them
    // on one thread (from the cost model, whatever the probe measured).
    const double cpu_tps = lay_out_for(1, GpuTarget{}).placement->plan.prediction.decode_tps_per_seq;
    price_as_device_reading_at(even, 0.8 * cpu_tps * double(planner::ModelShape::from_gguf(file).total_weight_bytes()) / 1e9);
    auto weigh = [&](int batch) {
        RunLayout out = lay_out_for(batch, even);
        INFO("batch " << batch << ": the device's plan " << (out.device_prediction ? out.device_prediction->decode_tps_per_seq : 0)
                      << " tokens/s a sequence");
        if (out.placement) CHECK(out.placement->plan.workload.batch == batch);
        return out.cpu_alone_wins;
    };
    CHECK(weigh(1));
    CHECK_FALSE(weigh(32));
}

TEST_CASE("beside a device, the CPU alone is weighed as it would run alone, its KV cache spilled to disk", "[model][device]") {
    auto path = test::default_model_path();
    STRATA_REQUIRE_MODEL(path, "SmolLM2-135M-Instruct.Q4_1.gguf");
    Opened model(*path);
    const auto& [file, hp, unlimited] = model;
    // 150 MiB cannot hold SmolLM2's weights beside a 4096-position KV cache (90 MiB): it spills.
    constexpr uint64_t kDram = 150ull << 20;
    const KvSize kv = kv_size(hp, 0, 4096, DType::F16, nullptr);
    PlacementOptions po;
    po.n_ctx = 4096;
    po.n_predict = 16;
    po.kv_type = DType::F16;
    po.time_model_file = false;  // priced from the probe's curve, alike in both layouts
    const LayoutOptions lo;
    // A budget each, outliving the layout whose KV cache holds part of it.
    storage::MemoryBudget dram_beside("DRAM", kDram, "--dram"), dram_alone("DRAM", kDram, "--dram");
    const auto laid_out = [&](const GpuTarget& gpu, const DeviceFootprint* device, int n_threads) {
        storage::MemoryBudget& dram = gpu.use ? dram_beside : dram_alone;
        const ResidencyInput in = WeightStore::residency_input(file, hp, dram, kv.all_bytes, 2);
        PlacementOptions o = po;
        o.n_threads = n_threads;
        return lay_out(file, hp, in, o, lo, kv, dram, gpu, device);
    };
    DeviceFootprint device;
    device.working_streamed = 32ull << 20;
    GpuTarget sim = simulated_device(file, hp);
    sim.gpu_mem = 75ull << 20;
    const RunLayout beside = laid_out(sim, &device, 1);
    REQUIRE(beside.placement);
    REQUIRE(beside.placement->alternative);
    const RunLayout alone = laid_out(GpuTarget{}, nullptr, 0);
    REQUIRE(alone.placement);
    REQUIRE(alone.placement->n_kv_layers_in_dram < hp.n_layer);
    CHECK(beside.placement->alternative->prediction.decode_tps_per_seq ==
          Approx(alone.placement->plan.prediction.decode_tps_per_seq).epsilon(0.01));
}

TEST_CASE("a device plan that decodes slower than the CPU alone for a long prompt's sooner first token is made again "
          "to decode no slower",
          "[model][device]") {
    auto path = test::default_model_path();
    STRATA_REQUIRE_MODEL(path, "SmolLM2-135M-Instruct.Q4_1.gguf");
    Opened model(*path);
    auto& [file, hp, dram] = model;
    constexpr int kCtx = 512;
    const KvSize kv = kv_size(hp, 0, kCtx, DType::F16, nullptr);
    const ResidencyInput in = WeightStore::residency_input(file, hp, dram, kv.all_bytes, 2);
    PlacementOptions po;
    po.n_ctx = kCtx, po.n_predict = 16, po.n_prompt = 480;
    po.kv_type = DType::F16;
    po.n_threads = po.n_threads_alone = 1;
    LayoutOptions lo;
    lo.op_offload.kind = OpOffloadMode::Off;  // the device prefills only the layers it holds or streams
    const auto lay_out_on = [&](const GpuTarget& gpu, const DeviceFootprint* device) {
        return lay_out(file, hp, in, po, lo, kv, dram, gpu, device);
    };
    // A device that computes a prompt at once but holds about a third of the weights, on a link
    // copying the rest at a quarter of the rate the CPU alone reads them: streamed layers decode slower.
    const double weights = double(planner::ModelShape::from_gguf(file).total_weight_bytes());
    const double cpu_tps = lay_out_on(GpuTarget{}, nullptr).placement->plan.prediction.decode_tps_per_seq;
    GpuTarget gpu = simulated_device(file, hp);
    REQUIRE(gpu.use);
    price_as_device_reading_at(gpu, 100 * cpu_tps * weights / 1e9);
    gpu.hw.gpu->h2d_gbps = gpu.hw.gpu->d2h_gbps = 0.25 * cpu_tps * weights / 1e9;
    DeviceFootprint device;
    device.working_streamed = 16ull << 20;
    gpu.gpu_mem = device.working_streamed + kv.layer_bytes + static_cast<uint64_t>(weights / 3);
    gpu.hw.gpu->memory_bytes = gpu.gpu_mem;

    // Named, the device runs the best plan for the workload: it trades decode for the first token.
    gpu.chosen = true;
    const RunLayout best = lay_out_on(gpu, &device);
    REQUIRE(best.placement);
    REQUIRE(best.placement->alternative);
    const planner::Prediction cpu = best.placement->alternative->prediction;
    const planner::Prediction traded = best.placement->predict(480, 16, 1);
    INFO("the CPU alone " << cpu.decode_tps_per_seq << " t/s, first token " << cpu.ttft_s << " s; the best plan "
                          << traded.decode_tps_per_seq << " t/s, " << traded.ttft_s << " s");
    REQUIRE(planner::trades_decode_for_prefill(traded, cpu));

    // Unnamed, the plan made again to decode no slower runs: sooner over the workload still.
    gpu.chosen = false;
    const RunLayout chosen = lay_out_on(gpu, &device);
    REQUIRE_FALSE(chosen.cpu_alone_wins);
    const planner::Prediction bounded = chosen.placement->predict(480, 16, 1);
    INFO("made again: " << bounded.decode_tps_per_seq << " t/s, " << bounded.ttft_s << " s");
    CHECK(bounded.decode_tps_per_seq >= cpu.decode_tps_per_seq);
    CHECK(planner::device_beats_cpu(bounded, cpu));
    CHECK(bounded.ttft_s < cpu.ttft_s);
    CHECK(bounded.ttft_s > traded.ttft_s);
    // `--show-plan` names the best plan it was made again beside.
    REQUIRE(chosen.placement->unbounded);
    CHECK(chosen.placement->unbounded->decode_tps_per_seq == Approx(traded.decode_tps_per_seq));
}
