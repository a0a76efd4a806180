#pragma once
// How a plan is shown to people: a table per run of layers with the same placement, the
// predicted times per stream with the bottleneck named, memory per tier, and the LP's
// rounding loss; and an SVG timeline of one pipelined decode step.
#include <string>
#include <vector>

#include "planner/cost_model.h"
#include "planner/hardware_profile.h"
#include "planner/model_shape.h"
#include "planner/plan.h"

namespace strata::planner {

// Consecutive layers with the same placement.
struct LayerRun {
    int32_t first = 0, last = 0;
    WeightOption weights = WeightOption::Gpu;
    KvOption kv = KvOption::Gpu;
    Device attention = Device::Gpu;
};
std::vector<LayerRun> layer_runs(const Plan& plan);

struct SearchStats {
    int n_policies = 0;
    double seconds = 0;
};

std::string format_plan(const Plan& plan, const ModelShape& shape, const HardwareProfile& hw, const SearchStats& stats,
                        const RuntimeLimits& limits = {});
// One line for logs and the runtime's start-up message.
std::string plan_summary(const Plan& plan);

// SVG of one decode step: lanes for NVMe, DRAM, PCIe H2D, CPU, GPU and PCIe D2H, one bar per
// layer and stream, scheduled in layer order with each layer's transfers ahead of its compute.
std::string plan_svg(const Plan& plan, const ModelShape& shape, const HardwareProfile& hw);

}  // namespace strata::planner
