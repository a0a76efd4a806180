#pragma once
// Engine options for tests: a model file and a context size, every other option at its default;
// the plan an engine makes for given options.
#include <filesystem>
#include <optional>
#include <stdexcept>

#include "planner/plan.h"
#include "runtime/engine.h"
#include "runtime/place/placement.h"

namespace strata::test {

inline runtime::EngineOptions engine_options(const std::filesystem::path& model, int n_ctx) {
    runtime::EngineOptions o;
    o.model = model;
    o.n_ctx = n_ctx;
    return o;
}

// The same on the simulated device, with 1 GiB of its memory.
inline runtime::EngineOptions sim_engine_options(const std::filesystem::path& model, int n_ctx) {
    runtime::EngineOptions o = engine_options(model, n_ctx);
    o.gpu.device = runtime::DeviceKind::Sim;
    o.gpu.gpu_mem = uint64_t{1} << 30;
    return o;
}

// The plan the engine makes for `o`, so that a test can change it and run the change.
inline planner::Plan plan_made_for(runtime::EngineOptions o) {
    std::optional<planner::Plan> made;
    o.on_plan = [&](const runtime::Placement& p) { made = p.plan; };
    runtime::Engine e(o);
    if (!made) throw std::runtime_error("the engine made no plan");
    return *made;
}

}  // namespace strata::test
