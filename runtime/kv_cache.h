#pragma once
// The key/value cache of one sequence: per layer, one float32 row of n_embd_kv values per
// position, position-major so that attention streams it linearly. Layers whose KV does not
// fit the DRAM budget live in a spill file (KvSpill) and are brought back through a ring of
// pinned buffers, prefetched ahead of the layer that needs them, like streamed weights.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <vector>

namespace strata {

class KvSpill;
class Trace;
namespace storage { class MemoryBudget; }

struct KvSpillOptions {
    int32_t n_resident_layers = 0;       // layers [0, n) stay in DRAM, the rest spill
    std::filesystem::path dir;           // where the spill file goes (removed at exit)
    int prefetch_depth = 2;
    storage::MemoryBudget* budget = nullptr;  // the ring's buffers are charged here
};

class KvCache {
public:
    KvCache(int32_t n_layer, int32_t n_ctx, int32_t n_embd_kv);
    KvCache(int32_t n_layer, int32_t n_ctx, int32_t n_embd_kv, const KvSpillOptions& spill);
    ~KvCache();
    KvCache(const KvCache&) = delete;
    KvCache& operator=(const KvCache&) = delete;

    int32_t n_ctx() const { return n_ctx_; }
    int32_t n_past() const { return n_past_; }  // positions filled so far
    int64_t row_stride() const { return n_embd_kv_; }
    // Valid for resident layers, and for a spilled layer between begin_layer and end_layer.
    float* k(int32_t layer, int64_t pos) { return base(layer).k + pos * n_embd_kv_; }
    float* v(int32_t layer, int64_t pos) { return base(layer).v + pos * n_embd_kv_; }

    // Brings a spilled layer's KV into memory (waits for its read); no-op when resident.
    void begin_layer(int32_t layer);
    // Writes positions [pos0, pos0 + n) of a spilled layer back to the spill file.
    void end_layer(int32_t layer, int64_t pos0, int64_t n);

    void advance(int32_t n) { n_past_ += n; }
    // Forgets positions >= n (keeps a shared prefix of n positions).
    void truncate(int32_t n);
    uint64_t bytes() const;  // DRAM held by resident layers
    uint64_t spill_buffer_bytes() const;  // DRAM of the spill ring (charged to its budget)
    int32_t n_spilled() const;
    void set_trace(Trace* trace);

    // DRAM (or spill file) bytes one layer's KV takes at this context size.
    static uint64_t layer_bytes(int32_t n_ctx, int32_t n_embd_kv);

private:
    struct LayerBase {
        float* k = nullptr;
        float* v = nullptr;
    };
    LayerBase base(int32_t layer) const;

    int32_t n_layer_;
    int32_t n_ctx_;
    int32_t n_embd_kv_;
    int32_t n_past_ = 0;
    int32_t n_resident_;
    size_t size_;  // floats per resident layer side (K or V)
    // Left uninitialised so that untouched context costs no resident memory.
    std::unique_ptr<float[]> k_, v_;
    std::unique_ptr<KvSpill> spill_;
};

}  // namespace strata
