// The block pool's reference counts, free list and prefix cache, against the rules of vLLM's
// block pool: referenced blocks are never handed out, cached blocks are evicted least
// recently used first and only when no uncached block is free.
#include <catch2/catch.hpp>

#include <set>
#include <vector>

#include "runtime/kv/kv_blocks.h"
#include "runtime/kv/prefix_cache.h"

using namespace strata;
using namespace strata::runtime;

namespace {
std::vector<int32_t> iota_tokens(int32_t first, int n) {
    std::vector<int32_t> t(n);
    for (int i = 0; i < n; ++i) t[i] = first + i;
    return t;
}
}  // namespace

TEST_CASE("block pool: allocate hands out each block once and refuses when all are referenced", "[unit][kv]") {
    KvBlockPool pool(4);
    std::set<int32_t> got;
    for (int i = 0; i < 4; ++i) {
        const int32_t b = pool.allocate();
        REQUIRE(b >= 0);
        CHECK(pool.ref_count(b) == 1);
        got.insert(b);
    }
    CHECK(got.size() == 4);
    CHECK(pool.n_free() == 0);
    CHECK(pool.n_used() == 4);
    CHECK(pool.allocate() == -1);  // exhausted: a value, not an exception
    pool.retain(*got.begin());
    pool.release(*got.begin());
    CHECK(pool.allocate() == -1);  // still referenced once
    pool.release(*got.begin());
    CHECK(pool.n_free() == 1);
    CHECK(pool.allocate() == *got.begin());
}

TEST_CASE("block pool: cached blocks survive release, are found again, and are evicted LRU last", "[unit][kv]") {
    KvBlockPool pool(3);
    const int32_t a = pool.allocate(), b = pool.allocate(), c = pool.allocate();
    const BlockKey ka = block_key(0, iota_tokens(0, 16)), kb = block_key(ka.hash, iota_tokens(16, 16));
    pool.publish(a, ka);
    pool.publish(b, kb);
    CHECK(pool.n_cached() == 2);
    pool.release(a);  // released first: least recently used
    pool.release(b);
    pool.release(c);  // uncached: handed out before any cached block
    CHECK(pool.n_free() == 3);

    // A lookup takes a cached block back out of the free list.
    CHECK(pool.find(kb) == b);
    CHECK(pool.ref_count(b) == 1);
    CHECK(pool.n_free() == 2);
    pool.release(b);  // now the most recently used

    CHECK(pool.allocate() == c);  // the uncached block first
    CHECK(pool.n_cached() == 2);
    CHECK(pool.allocate() == a);  // then the least recently used cached one, evicted
    CHECK(pool.n_cached() == 1);
    CHECK(pool.find(ka) == -1);
    CHECK(pool.find(kb) == b);
}

TEST_CASE("block pool: a key names one block; unpublish forgets it", "[unit][kv]") {
    KvBlockPool pool(2);
    const int32_t a = pool.allocate(), b = pool.allocate();
    const BlockKey k = block_key(0, iota_tokens(5, 16));
    pool.publish(a, k);
    pool.publish(b, k);  // the same content computed twice: the first block stays the cached one
    CHECK(pool.n_cached() == 1);
    CHECK_FALSE(pool.is_cached(b));
    CHECK(pool.find(k) == a);
    CHECK(pool.ref_count(a) == 2);
    pool.unpublish(a);
    CHECK(pool.find(k) == -1);
}

TEST_CASE("prefix cache keys: same tokens and parent match, any difference misses", "[unit][kv]") {
    const auto t = iota_tokens(100, 16);
    const BlockKey first = block_key(0, t);
    CHECK(block_key(0, t) == first);
    auto other = t;
    other[0] = 7;  // a different token at the start of the block
    CHECK_FALSE(block_key(0, other) == first);
    CHECK(block_key(0, other).hash != first.hash);
    // The same tokens after a different predecessor are a different block.
    const BlockKey second = block_key(first.hash, t);
    CHECK_FALSE(second == first);
    CHECK_FALSE(block_key(block_key(0, other).hash, t) == second);

    PrefixCache cache;
    CHECK(cache.insert(first, 3));
    CHECK_FALSE(cache.insert(block_key(0, t), 4));
    CHECK(cache.find(block_key(0, t)) == 3);
    CHECK(cache.find(block_key(0, other)) == -1);
    // A key with the same hash but other tokens (a collision) is a miss, not a wrong block.
    BlockKey forged = block_key(0, other);
    forged.hash = first.hash;
    CHECK(cache.find(forged) == -1);
}
