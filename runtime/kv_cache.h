#pragma once
// The key/value cache of one sequence: per layer, one float32 row of n_embd_kv values per
// position, position-major so that attention streams it linearly.
#include <cstdint>
#include <memory>

namespace strata {

class KvCache {
public:
    KvCache(int32_t n_layer, int32_t n_ctx, int32_t n_embd_kv);

    int32_t n_ctx() const { return n_ctx_; }
    int32_t n_past() const { return n_past_; }  // positions filled so far
    int64_t row_stride() const { return n_embd_kv_; }
    float* k(int32_t layer, int64_t pos) { return &k_[index(layer, pos)]; }
    float* v(int32_t layer, int64_t pos) { return &v_[index(layer, pos)]; }

    void advance(int32_t n) { n_past_ += n; }
    // Forgets positions >= n (keeps a shared prefix of n positions).
    void truncate(int32_t n) { n_past_ = n < n_past_ ? n : n_past_; }
    uint64_t bytes() const { return 2 * size_ * sizeof(float); }

private:
    size_t index(int32_t layer, int64_t pos) const {
        return (static_cast<size_t>(layer) * n_ctx_ + static_cast<size_t>(pos)) * n_embd_kv_;
    }
    int32_t n_ctx_;
    int32_t n_embd_kv_;
    int32_t n_past_ = 0;
    size_t size_;
    // Left uninitialised so that untouched context costs no resident memory.
    std::unique_ptr<float[]> k_, v_;
};

}  // namespace strata
