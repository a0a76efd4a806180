#pragma once
// Which layers keep their weights in DRAM and which are streamed from the model file each
// pass. The planner decides (runtime/place/placement); this maps its plan onto the runtime's own
// accounting of DRAM — output head and embeddings, KV cache and buffers, resident layers,
// the read-ahead ring — and checks that against the budget.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "runtime/weights/expert_cache.h"

namespace strata::planner { struct Plan; }

namespace strata::runtime {

struct ResidencyInput {
    uint64_t budget = 0;                 // DRAM bytes for everything the engine holds; 0 = no limit
    uint64_t fixed_bytes = 0;            // always resident: output head, embeddings, norms
    uint64_t other_bytes = 0;            // KV cache, activations, scratch
    uint64_t beside_bytes = 0;           // of other_bytes: a drafting engine's share (EngineOptions::dram_beside)
    std::vector<uint64_t> layer_bytes;   // weight bytes each layer reads when streamed
    int prefetch_depth = 2;              // layers read ahead of compute
    // A mixture of experts: per layer, the bytes that stay resident when its routed experts
    // are cached instead (every other tensor, each in its aligned range), and one cached
    // expert's slot (ExpertCache::slot_bytes). Empty and 0 for a dense model.
    std::vector<uint64_t> dense_bytes;
    uint64_t expert_slot_bytes = 0;
    int n_expert = 0;
};

struct Residency {
    std::vector<bool> resident;  // per layer
    std::vector<bool> on_device; // per layer: weights on the GPU, read once at load (not resident, not streamed)
    std::vector<bool> on_cpu;    // per layer, in a device plan: matmuls on the CPU (weights resident or streamed)
    int n_slots = 0;             // streaming buffers in the ring (0 when all resident)
    unsigned read_chunks = 0;    // reads of the weights' reader in flight (storage::ReaderOptions::queue_depth); 0: its default
    uint64_t slot_bytes = 0;     // each holds the largest streamed layer
    uint64_t resident_bytes = 0; // fixed + resident layers
    uint64_t total_bytes = 0;    // everything charged to the budget
    // Per layer: its routed experts are read on demand into the expert cache, the rest of the
    // layer is resident (a plan with expert offload; runtime/weights/expert_cache.h).
    std::vector<bool> experts_cached;
    ExpertCacheConfig experts;    // the cache (n_slots 0: none)
    uint64_t expert_slot_bytes = 0;

    int n_streamed() const;
    bool device(int il) const { return static_cast<size_t>(il) < on_device.size() && on_device[il]; }
    bool streamed(int il) const { return !resident[il] && !device(il); }
    bool cpu(int il) const { return static_cast<size_t>(il) < on_cpu.size() && on_cpu[il]; }
    bool cached_experts(int il) const { return static_cast<size_t>(il) < experts_cached.size() && experts_cached[il]; }
};

// Bytes a ring of `n_slots` buffers of `slot_bytes` takes in DRAM (alignment included).
uint64_t ring_bytes(uint64_t slot_bytes, int n_slots);

// The ring when any layer may be streamed: depth + 1 buffers (the layer being computed and
// `depth` being read; no more than there are layers) of the largest layer.
int ring_slots(const ResidencyInput& in);
uint64_t full_ring_bytes(const ResidencyInput& in);

// The least DRAM the weights can run in, beside the KV cache and activations: the output head
// and embeddings with the streaming ring or, for a mixture of experts when that is less, with
// every layer's other tensors and a cache of one layer's experts; or with every layer resident
// where that is less still (a tiny model beside a ring of whole huge pages).
uint64_t least_weight_bytes(const ResidencyInput& in);

// Throws OutOfBudget naming what must fit and `need` as the smallest budget that would do,
// when in.budget (not 0) is below `need`.
void check_min_budget(const ResidencyInput& in, uint64_t need);

// The most expert slots that fit in.budget beside the fixed weights, other_bytes and the
// layers (of those `cached`, all but the routed experts; the others whole); no budget: every
// cached layer's experts. Throws OutOfBudget, naming the smallest budget, when fewer than one
// layer's experts fit: a pass may choose them all.
int expert_cache_slots(const ResidencyInput& in, const std::vector<bool>& cached);

// Layers whose weights the plan keeps in DRAM are resident; those it reads from NVMe are
// streamed through min(depth + 1, streamed) buffers of the largest streamed layer. With
// `gpu` (a device backend runs the plan), layers on the GPU are on_device, layers copied to it
// each pass are resident or streamed by where the plan keeps them, and layers whose matmuls the
// plan puts on the CPU are on_cpu (resident or streamed likewise). Throws UsageError for a plan
// this runtime cannot run (another layer count; weights on a GPU without `gpu`) and
// PlanOverBudget when the layers it keeps do not fit in.budget (OutOfBudget for its experts'
// cache). With expert offload in the plan
// (plan.experts), every layer's resident part stays in DRAM and its routed experts go through
// a cache of plan.experts.cache_slots slots.
class PlanOverBudget : public OutOfBudget {
    using OutOfBudget::OutOfBudget;
};
Residency residency_from_plan(const planner::Plan& plan, const ResidencyInput& in, bool gpu = false);

}  // namespace strata::runtime
