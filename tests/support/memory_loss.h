#pragma once
// Device memory taken away mid-run in tests (the simulated device's --sim-shrink-after).
#include <catch2/catch.hpp>

#include <cstdint>

#include "runtime/engine.h"

namespace strata::test {

// `o` with all but `keep` bytes of the device memory its run uses taken away after `passes` passes.
inline runtime::EngineOptions shrinking(runtime::EngineOptions o, int64_t passes, uint64_t keep) {
    o.gpu.sim_shrink_after = passes;
    o.gpu.sim_shrink_bytes = *o.gpu.gpu_mem - keep;
    return o;
}

// The gauges of a run that lost device memory once and moved layers to the CPU: within what is left.
inline void check_layers_moved(const runtime::TierGauges& g) {
    CHECK(g.gpu_memory_losses == 1);
    CHECK(g.gpu_layers_moved > 0);
    CHECK(g.gpu_used <= g.gpu_budget);
}

}  // namespace strata::test
