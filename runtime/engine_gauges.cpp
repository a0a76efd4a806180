// Engine::gauges: what each memory tier holds and what the disk has served, read from the
// budgets, the KV pool, the weight store and the backend (the page's live engine view).
#include "runtime/engine.h"
#include "runtime/kv/kv_cache.h"
#include "runtime/place/placement.h"
#include "runtime/weights/expert_cache.h"
#include "runtime/weights/weight_store.h"

namespace strata::runtime {

TierGauges Engine::gauges() const {
    TierGauges g;
    const Backend::DeviceMemory device = left_device_ ? *left_device_ : backend_->device_memory();
    g.gpu_left = left_device_.has_value();
    g.gpu_used = device.used;
    g.gpu_budget = device.budget;
    g.gpu_memory_losses = device.losses;
    g.gpu_layers_moved = device.layers_moved;
    g.gpu_experts_given_back = device.experts_given_back;
    g.gpu_expert_choices = device.expert_choices;
    g.gpu_offloaded_expert_choices = device.offloaded_expert_choices;
    g.dram_used = dram_->used();
    g.dram_budget = dram_->limit() == UINT64_MAX ? 0 : dram_->limit();
    g.nvme_used = static_cast<uint64_t>(placement_->plan.prediction.used.nvme);
    g.nvme_read = weights_->stats().bytes_read;
    g.kv_blocks_used = kv_->pool().n_used();
    g.kv_blocks = kv_->pool().n_blocks();
    if (const ExpertCache* cache = weights_->expert_cache()) {
        const ExpertCacheStats s = cache->stats();
        g.has_expert_cache = true;
        g.expert_hits = s.hits;
        g.expert_misses = s.misses;
    }
    return g;
}

}  // namespace strata::runtime
