#pragma once
// Device plans for tests of the device backend: the plan the engine makes, every layer on the
// device, or a mixture of every way a layer's weights can be held.
#include <optional>

#include "core/error.h"
#include "planner/plan.h"
#include "runtime/engine.h"
#include "runtime/place/placement.h"

namespace strata::test {

// The plan the engine made for `o`, so that a test can change it and run the change.
inline planner::Plan plan_of(runtime::EngineOptions o) {
    std::optional<planner::Plan> made;
    o.on_plan = [&](const runtime::Placement& p) { made = p.plan; };
    runtime::Engine e(o);
    if (!made) throw BackendError("the engine made no plan", "an internal error in the test");
    return *made;
}

// Of every eight layers: two on the device, two copied in from DRAM each pass, two streamed
// from NVMe to the device, one computed by the CPU from DRAM and one streamed from NVMe to the
// CPU; KV in DRAM with attention where `cpu_attention` says.
inline planner::Plan heterogeneous(planner::Plan p, bool cpu_attention) {
    using planner::WeightOption;
    const WeightOption cycle[] = {WeightOption::Gpu,       WeightOption::DramToGpu, WeightOption::NvmeToGpu,
                                  WeightOption::DramCpu,   WeightOption::Gpu,       WeightOption::DramToGpu,
                                  WeightOption::NvmeToGpu, WeightOption::NvmeCpu};
    for (auto& l : p.layers) {
        l.weights = cycle[l.layer % 8];
        l.kv = planner::KvOption::Dram;
        l.attention = cpu_attention ? planner::Device::Cpu : planner::Device::Gpu;
    }
    p.policy.cpu_attention = cpu_attention;
    return p;
}

// Every layer's weights and KV on the device (the planner may prefer the CPU for some).
inline planner::Plan all_on_device(planner::Plan p) {
    for (auto& l : p.layers) {
        l.weights = planner::WeightOption::Gpu;
        l.kv = planner::KvOption::Gpu;
        l.attention = planner::Device::Gpu;
    }
    p.policy.cpu_attention = false;
    return p;
}

}  // namespace strata::test
