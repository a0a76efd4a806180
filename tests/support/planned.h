#pragma once
// Residency as the engine chooses it — the planner's plan for the store's budget — for tests
// that build a WeightStore directly.
#include "models/gguf_file.h"
#include "runtime/place/placement.h"

namespace strata::test {

inline runtime::DecideResidency planned(const models::GgufFile& file, int n_ctx = 64) {
    return [&file, n_ctx](const runtime::ResidencyInput& in) {
        runtime::PlacementOptions o;
        o.n_ctx = n_ctx;
        return place(file, in, o).residency;
    };
}

}  // namespace strata::test
