#pragma once
// The simulated device's rates for `strata probe`: the CPU's matmuls on the threads its ops run
// on, what an op costs beyond its bytes and flops (its hand-off, a small kernel's fixed cost), and
// a hop of a pass's data to the host and back.
#include <cstdint>
#include <vector>

#include "planner/hardware_profile.h"

namespace strata::probe {

planner::SimProfile measure_sim_device(const std::vector<DType>& types, int threads, bool quick, uint64_t llc_bytes);

}  // namespace strata::probe
