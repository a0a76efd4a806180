#pragma once
// Keys of the automatic prefix cache: a full KV block is named by its tokens chained with the
// key of the block before it (vLLM's automatic prefix caching), so two sequences share a
// block only when every token up to its end is the same. Lookups compare the tokens and the
// parent's hash, not just the hash, so a hash collision is a miss, never wrong KV.
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace strata::runtime {

struct BlockKey {
    uint64_t hash = 0;    // of parent and tokens
    uint64_t parent = 0;  // the previous block's hash; 0 for a sequence's first block
    std::vector<int32_t> tokens;

    bool operator==(const BlockKey& o) const { return hash == o.hash && parent == o.parent && tokens == o.tokens; }
};

// The key of the block holding `tokens` after the block whose hash is `parent` (0: none).
BlockKey block_key(uint64_t parent, std::span<const int32_t> tokens);

// key -> block id, for full blocks whose KV may be reused.
class PrefixCache {
public:
    int32_t find(const BlockKey& key) const;  // -1 when absent
    // Records `block` under `key` unless the key already has a block (that one is kept).
    bool insert(const BlockKey& key, int32_t block);
    void erase(const BlockKey& key);
    size_t size() const { return map_.size(); }

private:
    struct Hash {
        size_t operator()(const BlockKey& k) const { return static_cast<size_t>(k.hash); }
    };
    std::unordered_map<BlockKey, int32_t, Hash> map_;
};

}  // namespace strata::runtime
