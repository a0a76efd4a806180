// runtime/place/op_offload_choice: --op-offload parsed, settled against the planner's price on a
// toy plan (the hand-worked case of tests/unit/planner/test_op_offload.cpp), and the line
// --show-plan prints for it.
#include <catch2/catch.hpp>

#include <string>

#include "runtime/place/op_offload_choice.h"
#include "runtime/place/placement.h"
#include "tests/support/toy_hardware.h"
#include "tests/support/toy_shape.h"

using namespace strata;
using namespace strata::runtime;

namespace {

// The toy model beside a device on a 10 GB/s link, layers 1 and 2 on the CPU from DRAM, a
// 512-token prompt; the CPU rebuilds its layers for the device at `rebuild_gbps` (0: not measured).
Placement toy_placement(double rebuild_gbps) {
    Placement p;
    p.shape = test::toy_shape();
    p.hw = test::toy_op_offload_machine(10, 1e6, rebuild_gbps);
    p.plan.has_gpu = true;
    p.plan.n_layer = 4;
    p.plan.workload = planner::Workload{512, 128, 1, planner::Objective::Latency};
    for (int32_t il = 0; il < 4; ++il) {
        const bool cpu = il == 1 || il == 2;
        p.plan.layers.push_back({il, cpu ? planner::WeightOption::DramCpu : planner::WeightOption::Gpu, planner::KvOption::Gpu,
                                 cpu ? planner::Device::Cpu : planner::Device::Gpu});
    }
    p.plan.prediction.prefill.time_s = p.plan.prediction.ttft_s = 10;
    p.plan.prediction.total_s = 20;
    return p;
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("op offload choice: --op-offload parses auto, on, off and a row count", "[unit][planner]") {
    CHECK(parse_op_offload("auto") == OpOffloadMode{});
    CHECK(parse_op_offload("on") == OpOffloadMode{OpOffloadMode::On});
    CHECK(parse_op_offload("off") == OpOffloadMode{OpOffloadMode::Off});
    CHECK(parse_op_offload("12") == OpOffloadMode{OpOffloadMode::Rows, 12});
    for (const char* bad : {"0", "-3", "12x", "", "yes"}) CHECK_FALSE(parse_op_offload(bad).has_value());
}

TEST_CASE("op offload choice: settled from the planner's rows or the flag, and described with where its copies come from",
          "[unit][planner]") {
    // Rebuilt at 20 GB/s, faster than the link: from 11 rows, as the planner's hand-worked case.
    Placement p = toy_placement(20);
    settle_op_offload(p, OpOffloadMode{}, 256);
    CHECK(p.op_offload_rows == 11);
    CHECK(p.op_offload_why == "the planner's choice");
    std::string line = describe_op_offload(p);
    INFO(line);
    CHECK(has(line, "CPU layers 1-2 computed on the device in prompt passes of 11+ rows"));
    CHECK(has(line, "layers in DRAM rebuilt from the CPU's tiles at 20.0 GB/s"));
    CHECK(has(line, "predicted TTFT"));
    // A batch's prediction leaves op offload out (Placement::predict): its line claims no TTFT.
    Placement batch = p;
    batch.plan.workload.batch = 4;
    CHECK(has(describe_op_offload(batch), "the prediction for a batch of 4 leaves what it saves out"));
    CHECK_FALSE(has(describe_op_offload(batch), "predicted TTFT"));
    // No rebuild rate measured: priced (and said) as a read from the file.
    p = toy_placement(0);
    settle_op_offload(p, OpOffloadMode{}, 256);
    line = describe_op_offload(p);
    CHECK(has(line, "layers read from the model file (no rebuild rate measured)"));
    // The flag over the planner.
    settle_op_offload(p, OpOffloadMode{OpOffloadMode::Off}, 256);
    CHECK(p.op_offload_rows == 0);
    CHECK(has(describe_op_offload(p), "computed on the CPU in every pass (--op-offload off"));
    settle_op_offload(p, OpOffloadMode{OpOffloadMode::Rows, 64}, 256);
    CHECK(p.op_offload_rows == 64);
    // More rows than a pass holds: no pass would be copied in.
    settle_op_offload(p, OpOffloadMode{OpOffloadMode::Rows, 300}, 256);
    CHECK(p.op_offload_rows == 0);
    CHECK(has(describe_op_offload(p), "computed on the CPU in every pass (--op-offload 300: more rows than a pass holds (256)"));
    // Without CPU layers, nothing to say.
    Placement all_device = toy_placement(20);
    for (auto& l : all_device.plan.layers) l.weights = planner::WeightOption::Gpu, l.attention = planner::Device::Gpu;
    settle_op_offload(all_device, OpOffloadMode{}, 256);
    CHECK(describe_op_offload(all_device).empty());
}
