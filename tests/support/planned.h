#pragma once
// Residency as the engine chooses it — the planner's plan for the store's budget — for tests
// that build a WeightStore directly.
#include "models/gguf_file.h"
#include "runtime/place/placement.h"
#include "runtime/weights/weight_store.h"
#include "storage/budget.h"

namespace strata::test {

inline runtime::Residency planned(const models::GgufFile& file, const models::Hparams& hp,
                                  const storage::MemoryBudget& budget, uint64_t other_bytes = 0, int prefetch_depth = 2,
                                  int n_ctx = 64) {
    runtime::PlacementOptions o;
    o.n_ctx = n_ctx;
    return runtime::place(file, runtime::WeightStore::residency_input(file, hp, budget, other_bytes, prefetch_depth), o)
        .residency;
}

}  // namespace strata::test
