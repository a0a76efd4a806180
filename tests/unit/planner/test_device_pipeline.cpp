// planner/device_pipeline: a device plan's decode step as the device backend issues it, worked
// out by hand; and the cost model pricing each hop a step makes at the profile's measured cost.
#include <catch2/catch.hpp>

#include <vector>

#include "planner/cost_model.h"
#include "planner/device_pipeline.h"
#include "tests/support/toy_hardware.h"
#include "tests/support/toy_shape.h"

using namespace strata;
using namespace strata::planner;
using Site = DeviceLayerWork::Site;

namespace {

DeviceLayerWork layer(Site site, double compute, double copy = 0) {
    DeviceLayerWork w;
    w.site = site;
    w.compute_s = compute;
    w.copy_s = copy;
    return w;
}

DeviceLayerWork kv_in(DeviceLayerWork w, double kv_copy) {
    w.round_trip = true;
    w.kv_copy_s = kv_copy;
    return w;
}

}  // namespace

TEST_CASE("device pipeline: layers held on the device run back to back, then the tail", "[unit][planner]") {
    CHECK(device_pipeline_s({layer(Site::Device, 1), layer(Site::Device, 2)}, 2, 0.25, 0.5) == Approx(3.5));
}

TEST_CASE("device pipeline: copied layers after resident ones wait for the ring's two slots", "[unit][planner]") {
    // Three resident layers of 1 s, three copied in (2 s over the link, 0.5 s to compute). By
    // hand: layers 3 and 4 are copied at once (the link busy until 4 s) while 0-2 compute; layer
    // 3 computes 3-3.5 s and frees its slot; layer 5's copy then waits for the link (4-6 s);
    // layer 4 computes 4-4.5 s, layer 5 6-6.5 s. Streams overlapping without bounds: 6 s.
    std::vector<DeviceLayerWork> w(3, layer(Site::Device, 1));
    for (int i = 0; i < 3; ++i) w.push_back(layer(Site::CopiedIn, 0.5, 2));
    CHECK(device_pipeline_s(w, 2, 0, 0) == Approx(6.5));
    // One slot: each copy waits for the compute before it (layer 3 computes 3-3.5 s; layer 4 is
    // copied 3.5-5.5 s, computes to 6 s; layer 5 is copied 6-8 s, computes to 8.5 s).
    CHECK(device_pipeline_s(w, 1, 0, 0) == Approx(8.5));
}

TEST_CASE("device pipeline: a layer's KV blocks come in behind the weights queued before them", "[unit][planner]") {
    // Two resident layers and one copied in (2 s), each 1 s of compute, half of it before
    // attention, 0.1 s of KV blocks, a hop of 0.2 s. By hand: the link carries layer 2's weights
    // until 2 s, so layer 0's blocks (its rows down at 0.6 s) land at 2.1 s and it finishes at
    // 2.7 s; layer 1: rows down 3.3 s, blocks 3.4 s, done 4.0 s; layer 2: 4.7 s, done 5.3 s.
    std::vector<DeviceLayerWork> w{kv_in(layer(Site::Device, 1), 0.1), kv_in(layer(Site::Device, 1), 0.1),
                                   kv_in(layer(Site::CopiedIn, 1, 2), 0.1)};
    CHECK(device_pipeline_s(w, 2, 0.2, 0) == Approx(5.3));
    // All three resident: each layer is its compute, a hop and its blocks, 1.3 s.
    w[2] = kv_in(layer(Site::Device, 1), 0.1);
    CHECK(device_pipeline_s(w, 2, 0.2, 0) == Approx(3.9));
}

TEST_CASE("device pipeline: the host's work in a round trip and a CPU layer hold the device", "[unit][planner]") {
    DeviceLayerWork attends = kv_in(layer(Site::Device, 1), 0);
    attends.host_s = 0.75;  // the CPU attends for 0.75 s; no blocks cross the link
    attends.before_attention = 0.25;
    // 0.25 s, a hop's half, 0.75 s on the host, the other half, 0.75 s: 2 s; then a CPU layer.
    CHECK(device_pipeline_s({attends, layer(Site::Cpu, 3)}, 2, 0.25, 0) == Approx(5.0));
}

TEST_CASE("cost model: a device plan's step pays the measured hop once per round trip it makes", "[unit][planner]") {
    const ModelShape s = test::toy_shape();
    HardwareProfile hw = test::toy_cpu();
    hw.gpu = GpuProfile{"toy gpu", 8ull << 30, 1000, 100, 10, 10, "", 0};
    const Workload wl{100, 11, 1, Objective::Latency};
    const Policy policy{1, 1, false, false, DType::F16};
    auto step_s = [&](double hop_us, KvOption kv, int slots = 2) {
        hw.gpu->handoff_us = hop_us;
        Plan p;
        p.has_gpu = true;
        p.policy = policy;
        for (int il = 0; il < s.n_layer; ++il) p.layers.push_back({il, WeightOption::Gpu, kv, Device::Gpu});
        RuntimeLimits as_run;
        as_run.device_slots = slots;
        return CostModel(s, hw, wl, policy, as_run).predict(p).decode.time_s;
    };
    // A large hop (1 ms against 1 ms of compute a layer) moves the step by the hops it makes:
    // with the KV cache on the device, one (the step's inputs up, its logits down); in DRAM,
    // one more for every layer (its new rows down, its blocks up).
    CHECK(step_s(1000, KvOption::Gpu) - step_s(0, KvOption::Gpu) == Approx(1e-3));
    CHECK(step_s(1000, KvOption::Dram) - step_s(0, KvOption::Dram) == Approx((1 + s.n_layer) * 1e-3));
    // Without the runtime's slots (a plan for another machine) the streams overlap as the LP
    // assumes: the layers' round trips are not priced.
    CHECK(step_s(1000, KvOption::Dram, 0) - step_s(0, KvOption::Dram, 0) == Approx(1e-3));
}
