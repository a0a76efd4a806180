#pragma once
// Which layers keep their weights in DRAM and which are streamed from the model file each
// pass, under a DRAM budget. Until the planner decides per layer, the rule is: the output
// head, embeddings and norms first, then the ring of streaming buffers, then as many whole
// layers as still fit.
#include <cstdint>
#include <vector>

namespace strata {

struct ResidencyInput {
    uint64_t budget = 0;                 // DRAM bytes for everything the engine holds; 0 = no limit
    uint64_t fixed_bytes = 0;            // always resident: output head, embeddings, norms
    uint64_t other_bytes = 0;            // KV cache, activations, scratch
    std::vector<uint64_t> layer_bytes;   // weight bytes each layer reads when streamed
    int prefetch_depth = 2;              // layers read ahead of compute
};

struct Residency {
    std::vector<bool> resident;  // per layer
    int n_slots = 0;             // streaming buffers in the ring (0 when all resident)
    uint64_t slot_bytes = 0;     // each holds the largest streamed layer
    uint64_t resident_bytes = 0; // fixed + resident layers
    uint64_t total_bytes = 0;    // everything charged to the budget

    int n_streamed() const;
};

// Bytes a ring of `n_slots` buffers of `slot_bytes` takes in DRAM (alignment included).
uint64_t ring_bytes(uint64_t slot_bytes, int n_slots);

// Throws OutOfBudget naming what does not fit and the smallest budget that would.
Residency choose_residency(const ResidencyInput& in);

}  // namespace strata
