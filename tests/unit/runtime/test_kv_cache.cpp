// Sequences over the paged KV cache: block tables, prefix attachment, truncation of shared
// blocks, and the pool returning to its former use when sequences go.
#include <catch2/catch.hpp>

#include <vector>

#include "runtime/core/error.h"
#include "runtime/kv_cache.h"

using namespace strata;

namespace {
std::vector<int32_t> tokens(int n, int32_t salt = 0) {
    std::vector<int32_t> t(n);
    for (int i = 0; i < n; ++i) t[i] = (i * 7 + salt) % 50;
    return t;
}
}  // namespace

TEST_CASE("kv cache: a sequence gets a block per 16 positions and gives them back", "[unit][kv]") {
    KvCache kv(2, 256, 64, 8);
    CHECK(kv.pool().n_blocks() == 8);
    const SeqId s = kv.create_seq();
    CHECK(s != 0);  // sequence 0 is the single-sequence API's
    const auto t = tokens(40);
    REQUIRE(kv.reserve(s, 40));
    CHECK(kv.block_table(s).size() == 3);
    kv.commit(s, t);
    CHECK(kv.seq_len(s) == 40);
    CHECK(kv.pool().n_used() == 3);
    CHECK(kv.pool().n_cached() == 2);  // the two full blocks
    // Rows of different blocks do not overlap.
    const auto table = kv.block_table(s);
    CHECK(kv.k(1, table[1]) - kv.k(1, table[0]) == (table[1] - table[0]) * kv.block_stride());
    CHECK(kv.block_stride() >= KvCache::kBlockSize * kv.row_stride());

    CHECK_FALSE(kv.reserve(kv.create_seq(), 16 * 6));  // 6 more blocks: only 5 free
    kv.free_seq(s);
    CHECK(kv.pool().n_used() == 5);  // the failed reservation keeps what it took
}

TEST_CASE("kv cache: a later sequence attaches the cached blocks of a shared prefix", "[unit][kv]") {
    KvCache kv(2, 256, 64, 16);
    const auto t = tokens(50);
    const SeqId a = kv.create_seq();
    REQUIRE(kv.reserve(a, 50));
    kv.commit(a, t);
    kv.free_seq(a);
    CHECK(kv.pool().n_used() == 0);
    CHECK(kv.pool().n_cached() == 3);

    const SeqId b = kv.create_seq();
    auto same_start = t;
    same_start.resize(45);
    same_start.push_back(99);
    CHECK(kv.attach_prefix(b, same_start) == 32);  // whole blocks only: 45 common tokens -> 2 blocks
    CHECK(kv.seq_len(b) == 32);
    CHECK(kv.pool().n_used() == 2);

    const SeqId c = kv.create_seq();
    CHECK(kv.attach_prefix(c, std::span(t).first(32)) == 16);  // never the whole prompt
    const SeqId d = kv.create_seq();
    auto other = t;
    other[3] = 49;  // a different token in the first block: nothing to share
    CHECK(kv.attach_prefix(d, other) == 0);
    CHECK(kv.block_table(b)[0] == kv.block_table(c)[0]);
    CHECK(kv.pool().ref_count(kv.block_table(b)[0]) == 2);
}

TEST_CASE("kv cache: truncating into a shared block gives it up instead of writing it", "[unit][kv]") {
    KvCache kv(2, 256, 64, 16);
    const auto t = tokens(40);
    REQUIRE(kv.reserve(0, 40));
    kv.commit(0, t);
    const SeqId b = kv.create_seq();
    REQUIRE(kv.attach_prefix(b, t) == 32);
    const int32_t shared = kv.block_table(0)[1];
    CHECK(kv.pool().ref_count(shared) == 2);
    // Position 20 is in block 1, which b also holds: sequence 0 keeps only block 0.
    CHECK(kv.truncate_seq(0, 20) == 16);
    CHECK(kv.n_past() == 16);
    CHECK(kv.pool().ref_count(shared) == 1);
    CHECK(kv.pool().is_cached(shared));
    // Into a block only it holds: kept, and no longer cached under its old tokens.
    CHECK(kv.truncate_seq(b, 20) == 20);
    CHECK_FALSE(kv.pool().is_cached(shared));
    kv.free_seq(b);
    kv.truncate(0);
    CHECK(kv.pool().n_used() == 0);
}

TEST_CASE("kv cache: reserving past the context is a clear error", "[unit][kv]") {
    KvCache kv(1, 32, 64, 8);
    CHECK_THROWS_WITH(kv.reserve(0, 33), Catch::Contains("context is full"));
}
