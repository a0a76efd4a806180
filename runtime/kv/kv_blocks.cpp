#include "runtime/kv/kv_blocks.h"

#include "core/error.h"

namespace strata::runtime {

KvBlockPool::KvBlockPool(int32_t n_blocks)
    : n_blocks_(n_blocks), ref_(n_blocks, 0), key_(n_blocks), prev_(n_blocks, -1), next_(n_blocks, -1) {
    STRATA_ASSERT(n_blocks > 0);
    for (int32_t b = 0; b < n_blocks; ++b) push_back(b);
}

void KvBlockPool::push_front(int32_t b) {
    prev_[b] = -1;
    next_[b] = head_;
    (head_ >= 0 ? prev_[head_] : tail_) = b;
    head_ = b;
    ++n_free_;
}

void KvBlockPool::push_back(int32_t b) {
    next_[b] = -1;
    prev_[b] = tail_;
    (tail_ >= 0 ? next_[tail_] : head_) = b;
    tail_ = b;
    ++n_free_;
}

void KvBlockPool::unlink(int32_t b) {
    (prev_[b] >= 0 ? next_[prev_[b]] : head_) = next_[b];
    (next_[b] >= 0 ? prev_[next_[b]] : tail_) = prev_[b];
    prev_[b] = next_[b] = -1;
    --n_free_;
}

int32_t KvBlockPool::allocate(std::optional<BlockKey>* evicted) {
    const int32_t b = head_;
    if (b < 0) return -1;
    unlink(b);
    if (evicted) *evicted = key_[b];
    unpublish(b);  // evicted: the least recently used cached block, when no uncached one was free
    ref_[b] = 1;
    return b;
}

void KvBlockPool::retain(int32_t block) {
    STRATA_ASSERT(ref_[block] > 0);
    ++ref_[block];
}

void KvBlockPool::release(int32_t block) {
    STRATA_ASSERT(ref_[block] > 0);
    if (--ref_[block] > 0) return;
    if (is_cached(block)) push_back(block);  // most recently used: evicted last
    else push_front(block);                  // nothing worth keeping: handed out first
}

int32_t KvBlockPool::find(const BlockKey& key) {
    const int32_t b = cache_.find(key);
    if (b < 0) return -1;
    if (ref_[b]++ == 0) unlink(b);
    return b;
}

void KvBlockPool::publish(int32_t block, const BlockKey& key) {
    STRATA_ASSERT(ref_[block] > 0);
    if (is_cached(block) || !cache_.insert(key, block)) return;
    key_[block] = key;
}

void KvBlockPool::unpublish(int32_t block) {
    if (!key_[block]) return;
    cache_.erase(*key_[block]);
    key_[block].reset();
}

}  // namespace strata::runtime
