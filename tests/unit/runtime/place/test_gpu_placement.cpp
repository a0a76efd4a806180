// The CUDA backend's placement, on a catalog GPU (no device needed): every layer's matmuls on
// the GPU, weights kept there while the budget lasts and copied in otherwise, and the KV cache
// where --attention puts it; without a device the engine runs on the CPU and says why.
#include <catch2/catch.hpp>

#include "cpu/thread_pool.h"
#include "gpu/cuda_devices.h"
#include "models/gguf_file.h"
#include "planner/catalog.h"
#include "runtime/engine.h"
#include "runtime/place/gpu_placement.h"
#include "tests/support/model_paths.h"
#include "tests/support/skip.h"
#include "tests/support/tiny_engine.h"
#include "tests/support/tiny_model.h"

using namespace strata;
using namespace strata::models;
using namespace strata::runtime;

namespace {

GpuTarget catalog_gpu(uint64_t gpu_mem) {
    planner::DryRunSpec spec;
    spec.gpu = "h100-80g";
    spec.dram = 64ull << 30;
    GpuTarget t;
    t.use = true;
    t.hw = planner::profile_from_catalog(spec);
    t.hw.gpu->memory_bytes = gpu_mem;
    t.gpu_mem = gpu_mem;
    return t;
}

ResidencyInput input_of(const test::TinyModelFile& m) {
    ResidencyInput in;
    const ModelWeights w = ModelWeights::bind(m.file, m.hp);
    for (const auto& l : w.layers) {
        uint64_t b = 0;
        for (const WeightRef* r : {&l.attn_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_norm, &l.ffn_gate, &l.ffn_up, &l.ffn_down})
            b += r->info ? r->info->nbytes : 0;
        in.layer_bytes.push_back(b);
    }
    return in;
}

}  // namespace

TEST_CASE("gpu placement: a budget that holds the model keeps every layer and the KV on the device", "[gpu_placement]") {
    test::TinyModelFile m("gpu_place.gguf", test::tiny_config("llama", 256, 6, 512), 3);
    const ResidencyInput in = input_of(m);
    PlacementOptions po;
    po.n_ctx = 256;
    const GpuPlacement g = place_on_gpu(m.file, in, po, catalog_gpu(8ull << 30), 4ull << 30, DType::F16, AttentionChoice::Auto, true);
    const Residency& r = g.placement.residency;
    CHECK(std::count(r.on_device.begin(), r.on_device.end(), true) == m.hp.n_layer);
    CHECK(g.kv == KvPlacement::Device);
}

TEST_CASE("gpu placement: a small budget copies layers in, never runs a layer on the CPU", "[gpu_placement]") {
    test::TinyModelFile m("gpu_place_small.gguf", test::tiny_config("llama", 256, 8, 512), 4);
    const ResidencyInput in = input_of(m);
    uint64_t total = 0, largest = 0;
    for (uint64_t b : in.layer_bytes) total += b, largest = std::max(largest, b);
    PlacementOptions po;
    po.n_ctx = 256;
    // A host far slower than the link (this model's layers are so small that on the catalog's
    // CPU computing one where it lies costs less than a copy and a launch): every layer the
    // device cannot hold is copied in.
    GpuTarget gpu = catalog_gpu(8ull << 30);
    gpu.hw.cpu.gemv_gbps = 0.01, gpu.hw.cpu.gemm_gflops = 0.1;
    gpu.hw.cpu.rates.clear();
    const GpuPlacement g = place_on_gpu(m.file, in, po, gpu, total / 2 + 2 * largest, DType::F16, AttentionChoice::Gpu, true);
    const Residency& r = g.placement.residency;
    const auto n_device = std::count(r.on_device.begin(), r.on_device.end(), true);
    CHECK(n_device > 0);
    CHECK(n_device < m.hp.n_layer);
    for (const auto& l : g.placement.plan.layers) CHECK(planner::device_of(l.weights) == planner::Device::Gpu);
    CHECK(g.kv != KvPlacement::HostCpuAttention);
}

TEST_CASE("gpu placement: a batch is planned as its sequences; their prompts' activations leave layers and KV their room", "[gpu_placement]") {
    test::TinyModelFile m("gpu_place_batch.gguf", test::tiny_config("llama", 256, 6, 512), 6);
    const ResidencyInput in = input_of(m);
    uint64_t layers = 0;
    for (uint64_t b : in.layer_bytes) layers += b;
    constexpr int kBatch = 16, kSeqCtx = 4096;
    PlacementOptions po;
    po.n_ctx = kSeqCtx, po.n_prompt = 4000, po.n_predict = 32;
    po.n_batch = kBatch, po.kv_positions = kBatch * kSeqCtx;
    const uint64_t kv = uint64_t(kBatch) * kSeqCtx * m.hp.n_layer * 2 * m.hp.n_embd_kv() * 2;  // F16 keys and values
    // Room for every layer and the batch's KV cache, and a margin for the head, the embeddings and
    // the prompts' hidden states: their activations (tens of MiB in one pass) are the device
    // backend's working set, held apart.
    const uint64_t hidden = uint64_t(kBatch) * 4000 * m.hp.n_embd * 2;
    const GpuPlacement g = place_on_gpu(m.file, in, po, catalog_gpu(8ull << 30), layers + kv + hidden + (4ull << 20),
                                        DType::F16, AttentionChoice::Auto, true);
    CHECK(g.placement.plan.workload.batch == kBatch);
    CHECK(g.placement.plan.policy.batch == kBatch);
    const Residency& r = g.placement.residency;
    CHECK(std::count(r.on_device.begin(), r.on_device.end(), true) == m.hp.n_layer);
    CHECK(g.kv == KvPlacement::Device);
}

TEST_CASE("gpu placement: --attention cpu keeps the KV cache on the host", "[gpu_placement]") {
    test::TinyModelFile m("gpu_place_cpu.gguf", test::tiny_config("llama", 256, 4, 512), 5);
    PlacementOptions po;
    po.n_ctx = 256;
    const GpuPlacement g =
        place_on_gpu(m.file, input_of(m), po, catalog_gpu(8ull << 30), 4ull << 30, DType::F16, AttentionChoice::Cpu, true);
    CHECK(g.kv == KvPlacement::HostCpuAttention);
    CHECK(g.placement.plan.policy.cpu_attention);
}

TEST_CASE("gpu: without a device the engine runs on the CPU and says why", "[gpu_placement]") {
    if (!gpu::list_devices().devices.empty()) STRATA_SKIP("this machine has a GPU");
    const std::filesystem::path path = test::tiny_llama_path();
    EngineOptions eo;
    eo.model = path;
    eo.n_ctx = 64;
    eo.gpu.gpu_mem = 1ull << 30;
    Engine e(eo);
    CHECK(e.backend_name() == "cpu");
    const GpuTarget t = find_gpu(eo.gpu, e.file(), e.hparams(), DType::F16);
    CHECK_FALSE(t.use);
    CHECK_FALSE(t.why_not.empty());
    // Named, it is refused with the reason rather than run on the CPU.
    GpuRequest named = eo.gpu;
    named.device = DeviceKind::Cuda;
    CHECK_THROWS_WITH(find_gpu(named, e.file(), e.hparams(), DType::F16), Catch::Contains(t.why_not));
}

TEST_CASE("gpu: the simulated device takes cores only where it runs; --gpu-mem 0 leaves them all to the CPU", "[gpu_placement]") {
    GpuRequest sim;
    sim.device = DeviceKind::Sim;
    sim.sim_threads = 1;
    CHECK(host_thread_count(sim, 0) == std::max(1, cpu::default_thread_count() - 1));
    CHECK(host_thread_count(sim, 3) == 3);  // -t given: as given
    sim.gpu_mem = 0;
    CHECK(host_thread_count(sim, 0) == 0);  // 0: every core
    GpuRequest cpu_only;
    cpu_only.device = DeviceKind::Cpu;
    CHECK(host_thread_count(cpu_only, 0) == 0);
}

TEST_CASE("gpu: the simulated device's threads past the cores the host leaves are priced as those cores", "[gpu_placement]") {
    const int cores = std::max(2, cpu::default_thread_count());
    CHECK(planner::sim_effective_threads(1, cores - 1, cores) == 1);
    CHECK(planner::sim_effective_threads(2, cores - 2, cores) == 2);
    CHECK(planner::sim_effective_threads(4, cores - 1, cores) == 1);  // they take turns on the one core left
    CHECK(planner::sim_effective_threads(64, cores, cores) == 1);     // at least one
    // As find_gpu prices it: more threads than the host leaves never price a faster device.
    auto c = test::tiny_config("llama", 64, 2, 128);
    test::TinyModelFile m("gpu_sim_threads.gguf", c, 2);
    GpuRequest req;
    req.gpu_mem = 1ull << 30;
    req.device = DeviceKind::Sim;
    const auto priced = [&](int threads) {
        req.sim_threads = threads;
        const GpuTarget t = find_gpu(req, m.file, m.hp, DType::F16, cores - 1);
        REQUIRE(t.use);
        return t.hw.gpu->sim_parallelism();
    };
    CHECK(priced(1) == 1);
    CHECK(priced(2) == 1);
    CHECK(priced(16) == 1);
}

TEST_CASE("gpu: every architecture runs on the simulated device", "[gpu_placement]") {
    GpuRequest req;
    req.gpu_mem = 1ull << 30;
    req.device = DeviceKind::Sim;
    for (const char* arch : {"llama", "mistral", "qwen2", "qwen3", "qwen3moe", "gemma2", "gemma3", "phi3"}) {
        auto c = test::tiny_config(arch, 64, 2, 128);
        c["qk_norm"] = c["arch"] == "qwen3" || c["arch"] == "qwen3moe" || c["arch"] == "gemma3";
        c["post_norms"] = c["arch"] == "gemma2" || c["arch"] == "gemma3";
        if (c["arch"] == "qwen3moe") c["n_expert"] = 4, c["n_expert_used"] = 2, c["n_ff_exp"] = 64;
        test::TinyModelFile m(std::string("gpu_") + arch + ".gguf", c, 2);
        const GpuTarget t = find_gpu(req, m.file, m.hp, DType::F16);
        INFO(arch << ": " << t.why_not);
        CHECK(t.use);
    }
}

TEST_CASE("gpu placement: layers read from NVMe are priced at the rate of the ring's reads in flight", "[gpu_placement]") {
    test::TinyModelFile m("gpu_place_nvme.gguf", test::tiny_config("llama", 256, 8, 512), 7);
    ResidencyInput in = input_of(m);
    uint64_t total = 0, largest = 0;
    for (uint64_t b : in.layer_bytes) total += b, largest = std::max(largest, b);
    in.budget = full_ring_bytes(in);  // DRAM holds the ring and nothing else: what the device does not hold streams
    PlacementOptions po;
    po.n_ctx = 256;
    po.time_model_file = false;  // the curves below stand for the disk
    auto decode_tps = [&](std::vector<std::pair<double, double>> curve) {
        GpuTarget gpu = catalog_gpu(8ull << 30);
        gpu.hw.nvme.read_gbps = 2;
        gpu.hw.nvme.read_depth_curve = std::move(curve);
        const GpuPlacement g = place_on_gpu(m.file, in, po, gpu, total / 2 + 2 * largest, DType::F16, AttentionChoice::Gpu, true);
        REQUIRE(g.placement.residency.n_streamed() > 0);
        return g.placement.plan.prediction.decode_tps_per_seq;
    };
    // The same deep rate; one disk reaches it only with 32 MiB in flight, far more than a ring of these small layers keeps.
    const double flat = decode_tps({{1u << 20, 2.0}, {32u << 20, 2.0}});
    const double deep_only = decode_tps({{1u << 20, 0.05}, {32u << 20, 2.0}});
    CHECK(deep_only < 0.8 * flat);
}
