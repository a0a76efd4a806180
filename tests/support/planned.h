#pragma once
// Residency as the engine chooses it — the planner's plan for the store's budget — for tests
// that build a WeightStore directly.
#include "models/gguf_file.h"
#include "runtime/placement.h"

namespace strata::test {

inline DecideResidency planned(const GgufFile& file, int n_ctx = 64) {
    return [&file, n_ctx](const ResidencyInput& in) {
        PlacementOptions o;
        o.n_ctx = n_ctx;
        return place(file, in, o).residency;
    };
}

}  // namespace strata::test
