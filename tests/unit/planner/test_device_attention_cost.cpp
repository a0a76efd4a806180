// The device's decode attention priced as it runs. The simulated device runs the CPU's attention
// kernel on its own threads, so the CPU's tile model prices it for the model's own heads; the
// probe's attention points (one reference layer, scaled by the bytes read) price a GPU.
#include <catch2/catch.hpp>

#include "planner/cost_model.h"
#include "planner/model_shape.h"
#include "tests/support/toy_hardware.h"
#include "tests/support/toy_shape.h"

using namespace strata;
using namespace strata::planner;

TEST_CASE("cost model: the simulated device's decode attention is the CPU's tile model on its threads; a GPU's, its "
          "measured points",
          "[unit][planner]") {
    const ModelShape s = test::toy_shape();  // 8 KV heads of 128, one query head each
    HardwareProfile hw = test::toy_cpu();
    // 1 ns per K/V value of a tile, nothing else: a tile of n keys takes n x 128 ns.
    hw.cpu.attention_tile = AttentionTileCost{{{DType::F16, 1.0}}, 0, 0, 0, 0};
    hw.cpu.n_cores = 8, hw.cpu.n_threads = 2;  // a core left for the simulated device's copies
    hw.gpu = GpuProfile{"toy gpu", 8ull << 30, 1000, 100, 10, 10, "", 0};
    hw.gpu->ops = DeviceOps{};
    // The reference layer's points: 0.05 ns per byte read, 5x faster than the tiles above (a
    // key's K and V of one head are 512 bytes, 128 ns).
    constexpr double kUsPerByte = 0.05e-3, kPerKey = DeviceOps::kAttentionKvBytesPerKey;
    hw.gpu->ops->attention = {{512, 512 * kPerKey * kUsPerByte}, {4096, 4096 * kPerKey * kUsPerByte}};
    const Workload wl{100, 11, 1, Objective::Latency};
    const double ctx = 100 + 11 / 2.0;  // the average context of the decode steps
    const double tile = ctx * 128 * 1e-9;
    auto attention = [&](int sim_threads, int batch) {
        hw.gpu->sim_threads = sim_threads;
        const CostModel cm(s, hw, wl, Policy{batch, 1, false, false, DType::F16});
        return cm.layer_kv(0, KvOption::Gpu).decode[static_cast<int>(Stream::GpuCompute)];
    };
    // Five sequences' 40 tiles in one loop (cpu::attention_batch) over the device's threads.
    CHECK(attention(1, 5) == Approx(40 * tile));
    CHECK(attention(2, 5) == Approx(20 * tile));
    // A GPU: the bytes it reads at the rate its points measured.
    const double bytes = 5 * ctx * s.kv_bytes_per_token(DType::F16);
    CHECK(attention(0, 5) == Approx(bytes * kUsPerByte * 1e-6));
    CHECK(attention(0, 5) == Approx(hw.gpu->ops->attention_s(bytes)));
}
