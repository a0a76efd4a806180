#pragma once
// The simulated device's rates for `strata probe`: the CPU's matmuls on the threads its ops run
// on, and what an op costs beyond its bytes and flops (its hand-off, a small kernel's fixed cost).
#include <cstdint>
#include <vector>

#include "planner/hardware_profile.h"

namespace strata::probe {

planner::SimProfile measure_sim_device(const std::vector<DType>& types, int threads, bool quick, uint64_t llc_bytes);

}  // namespace strata::probe
