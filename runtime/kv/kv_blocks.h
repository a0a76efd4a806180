#pragma once
// The bookkeeping of a paged KV cache (vLLM's block pool): blocks of a fixed number of
// positions, each with a reference count (one per sequence whose block table holds it). Full
// blocks may be published in the prefix cache; when their last sequence lets go they stay
// cached, unreferenced, and are evicted least recently used first, only when a fresh block is
// needed and no block without cached content is free. Holds no KV itself (KvCache does).
#include <cstdint>
#include <optional>
#include <vector>

#include "runtime/kv/prefix_cache.h"

namespace strata::runtime {

class KvBlockPool {
public:
    explicit KvBlockPool(int32_t n_blocks);

    int32_t n_blocks() const { return n_blocks_; }
    int32_t n_free() const { return n_free_; }  // unreferenced: what allocate can hand out, cached ones included
    int32_t n_used() const { return n_blocks_ - n_free_; }  // referenced by some sequence
    int32_t n_cached() const { return static_cast<int32_t>(cache_.size()); }

    // A block with reference count 1, or -1 when every block is referenced (an expected
    // outcome: the caller waits or refuses). Evicts the least recently used cached block
    // when no uncached block is free; its key goes to `evicted` when given (its content is
    // still in the block until the caller writes it).
    int32_t allocate(std::optional<BlockKey>* evicted = nullptr);
    void retain(int32_t block);
    // Drops one reference; at 0 the block is free again (its cached content kept, if any).
    void release(int32_t block);
    int32_t ref_count(int32_t block) const { return ref_[block]; }

    // The cached block with this key, retained; -1 when there is none.
    int32_t find(const BlockKey& key);
    // Makes a full, referenced block findable by `key` (no-op when the key has a block already).
    void publish(int32_t block, const BlockKey& key);
    // Forgets a block's key: its content is about to change.
    void unpublish(int32_t block);
    bool is_cached(int32_t block) const { return key_[block].has_value(); }

private:
    // Unreferenced blocks in eviction order: uncached ones first, then cached ones from least
    // to most recently released (an intrusive list: O(1) removal when a cached block is found).
    void push_front(int32_t b);
    void push_back(int32_t b);
    void unlink(int32_t b);

    int32_t n_blocks_;
    int32_t n_free_ = 0;
    std::vector<int32_t> ref_;
    std::vector<std::optional<BlockKey>> key_;
    PrefixCache cache_;
    std::vector<int32_t> prev_, next_;  // free list; -1 ends it
    int32_t head_ = -1, tail_ = -1;
};

}  // namespace strata::runtime
