#include "runtime/kv/prefix_cache.h"

namespace strata::runtime {

namespace {
uint64_t mix(uint64_t h, uint64_t v) {  // splitmix64 step over the running hash
    h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    h ^= h >> 30;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 27;
    h *= 0x94D049BB133111EBull;
    return h ^ (h >> 31);
}
}  // namespace

BlockKey block_key(uint64_t parent, std::span<const int32_t> tokens) {
    BlockKey k;
    k.parent = parent;
    k.tokens.assign(tokens.begin(), tokens.end());
    uint64_t h = mix(0x5354524154414B56ull, parent);
    for (int32_t t : tokens) h = mix(h, static_cast<uint32_t>(t));
    k.hash = h ? h : 1;  // 0 means "no parent"
    return k;
}

int32_t PrefixCache::find(const BlockKey& key) const {
    auto it = map_.find(key);
    return it == map_.end() ? -1 : it->second;
}

bool PrefixCache::insert(const BlockKey& key, int32_t block) { return map_.emplace(key, block).second; }

void PrefixCache::erase(const BlockKey& key) { map_.erase(key); }

}  // namespace strata::runtime
