#pragma once
// The routed experts of a mixture-of-experts model that does not fit the DRAM budget, held in
// a bounded cache of expert-sized slots and read from the model file on demand. Once a layer's
// router has chosen, fetch() issues the O_DIRECT reads (io_uring) of the chosen experts not
// held, all at once; the pass computes the shared experts and the held experts while they
// land, and waits for each missing one only when it reaches it. Which experts stay is the
// policy's choice (runtime/weights/expert_slots.h); a slot in use by the pass is never given
// away. A read that fails fails the pass with an IoError and leaves its slot empty.
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "runtime/weights/expert_slots.h"
#include "runtime/weights/model_weights.h"

namespace strata::models { class GgufFile; }

namespace strata::storage {
class MemoryBudget;
class PinnedPool;
class Reader;
}  // namespace strata::storage

namespace strata::runtime {

struct ExpertCacheStats {
    uint64_t hits = 0;        // chosen experts found in the cache
    uint64_t misses = 0;      // chosen experts read from the file
    uint64_t bytes_read = 0;  // bytes those reads took from the file
    double wait_seconds = 0;  // compute blocked on an expert's read
    uint64_t decode_hits = 0, decode_misses = 0;  // of those, in passes of decode steps only
    double hit_rate() const { return hits + misses ? double(hits) / double(hits + misses) : 0; }
};

// One expert's three matrices.
struct ExpertMats {
    WeightRef gate, up, down;
};

struct ExpertCacheConfig {
    int n_slots = 0;
    ExpertPolicy policy = ExpertPolicy::Adaptive;
    std::vector<std::vector<uint64_t>> seed_counts;  // saved routing counts [layer][expert]; empty: none
    std::vector<std::vector<int32_t>> preload;       // per layer: experts read at load (the plan's hot ones)
};

class ExpertCache {
public:
    // Bytes of one slot for these layers' experts: each of the three matrices in its
    // O_DIRECT-aligned file range, the largest of any layer.
    static uint64_t slot_bytes(const models::GgufFile& file, const std::vector<LayerWeights>& layers);

    // `layers` are the file's views (ModelWeights::bind); only the expert tensors of the layers
    // in `cached` are read. `check_file` throws when the model file changed since load.
    ExpertCache(const models::GgufFile& file, storage::Reader& reader, storage::MemoryBudget& budget,
                std::vector<LayerWeights> layers, const std::vector<bool>& cached, const ExpertCacheConfig& config,
                std::function<void()> check_file);
    ~ExpertCache();  // waits for reads in flight: they land in the slots
    ExpertCache(const ExpertCache&) = delete;
    ExpertCache& operator=(const ExpertCache&) = delete;

    // Whether layer il's experts come from the cache.
    bool holds(int il) const { return static_cast<size_t>(il) < cached_.size() && cached_[il]; }
    int n_slots() const;
    // Counts layer il's chosen experts (distinct) for the policy, keeps the held ones and
    // issues the reads of the others. The slots stay the pass's until release(). `decode`:
    // the pass has decode steps only (counted apart: what a plan's decode prediction uses).
    void fetch(int il, std::span<const int32_t> experts, bool decode);
    // The share of the offloaded layers' experts the cache can hold.
    double held_share() const;
    // Whether expert e of layer il, fetched before, is in memory (its read, if any, is done).
    bool ready(int il, int e);
    // Expert e of layer il, fetched before: waits for its read. Throws IoError.
    ExpertMats get(int il, int e);
    // The pass is done with the experts it fetched.
    void release();
    ExpertCacheStats stats() const { return stats_; }

private:
    void issue(int slot, int il, int e);
    void wait_slot(int slot);
    std::byte* part(int slot, int p) const;

    const models::GgufFile& file_;
    storage::Reader& reader_;
    std::vector<LayerWeights> layers_;
    std::vector<bool> cached_;
    std::function<void()> check_file_;
    uint64_t part_bytes_ = 0;  // each of a slot's three parts
    std::unique_ptr<storage::PinnedPool> pool_;
    ExpertSlots slots_;
    std::vector<std::array<uint64_t, 3>> tickets_;  // per slot: its reads in flight
    std::vector<uint8_t> pending_;                  // per slot: reads in flight
    std::vector<std::array<uint64_t, 3>> at_;       // per slot: where each matrix starts in its part
    ExpertCacheStats stats_;
};

}  // namespace strata::runtime
