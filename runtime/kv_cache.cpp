#include "runtime/kv_cache.h"

#include "runtime/core/error.h"
#include "runtime/kv_spill.h"
#include "storage/file_io.h"

namespace strata {

KvCache::KvCache(int32_t n_layer, int32_t n_ctx, int32_t n_embd_kv)
    : KvCache(n_layer, n_ctx, n_embd_kv, KvSpillOptions{n_layer, {}, 2, nullptr}) {}

KvCache::KvCache(int32_t n_layer, int32_t n_ctx, int32_t n_embd_kv, const KvSpillOptions& spill)
    : n_layer_(n_layer),
      n_ctx_(n_ctx),
      n_embd_kv_(n_embd_kv),
      n_resident_(std::min(spill.n_resident_layers, n_layer)),
      size_(static_cast<size_t>(n_ctx) * n_embd_kv),
      k_(new float[size_ * n_resident_]),
      v_(new float[size_ * n_resident_]) {
    if (n_resident_ < n_layer_) spill_ = std::make_unique<KvSpill>(n_layer_ - n_resident_, n_ctx, n_embd_kv, spill);
}

KvCache::~KvCache() = default;

uint64_t KvCache::layer_bytes(int32_t n_ctx, int32_t n_embd_kv) { return KvSpill::layer_bytes(n_ctx, n_embd_kv); }

KvCache::LayerBase KvCache::base(int32_t layer) const {
    if (layer < n_resident_) return {&k_[layer * size_], &v_[layer * size_]};
    auto [k, v] = spill_->current(layer - n_resident_);
    return {k, v};
}

void KvCache::begin_layer(int32_t layer) {
    if (layer >= n_resident_) spill_->begin(layer - n_resident_);
}

void KvCache::end_layer(int32_t layer, int64_t pos0, int64_t n) {
    if (layer >= n_resident_) spill_->end(layer - n_resident_, pos0, n);
}

void KvCache::truncate(int32_t n) {
    n_past_ = n < n_past_ ? n : n_past_;
    if (spill_) spill_->truncate(n_past_);
}

uint64_t KvCache::bytes() const { return 2 * size_ * n_resident_ * sizeof(float); }

uint64_t KvCache::spill_buffer_bytes() const { return spill_ ? spill_->buffer_bytes() : 0; }

int32_t KvCache::n_spilled() const { return n_layer_ - n_resident_; }

void KvCache::set_trace(Trace* trace) {
    if (spill_) spill_->set_trace(trace);
}

}  // namespace strata
