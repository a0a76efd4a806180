// How the decode attention kernel splits a row's keys (gpu/kernels/decode_splits.h), on the
// host: every key in exactly one split of whole KV blocks, a shallow row spread over about
// kShallowSplits thread blocks, a deep one in runs of 128, and the grid holding every row's splits.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>

#include "core/kernel_shapes.h"
#include "gpu/kernels/decode_splits.h"

using namespace strata::gpu::blocks;
using strata::kKvBlockSize;

TEST_CASE("decode attention splits: whole KV blocks, every key once, shallow rows spread, deep rows in runs of 128", "[unit]") {
    for (int64_t n = 1; n <= 40000; ++n) {
        INFO(n << " keys");
        const int len = decode_split_keys(n);
        const int64_t live = decode_live_splits(n);
        REQUIRE(len % kKvBlockSize == 0);
        REQUIRE(len >= kKvBlockSize);
        REQUIRE(len <= kDecodeSplitMaxKeys);
        // The live splits cover the keys, the last one holding at least one.
        REQUIRE((live - 1) * len < n);
        REQUIRE(live * len >= n);
        const int64_t blocks = (n + kKvBlockSize - 1) / kKvBlockSize;
        if (n > int64_t(kShallowSplits) * kDecodeSplitMaxKeys)
            REQUIRE(len == kDecodeSplitMaxKeys);
        else if (blocks <= kShallowSplits)
            REQUIRE(live == blocks);  // a block a split
        else
            REQUIRE(live > kShallowSplits / 2);  // rounding to whole blocks at most halves them
        REQUIRE(live <= decode_grid_splits(blocks));
    }
    // The grid: as many splits as the deepest row the table holds takes, no more.
    for (int64_t max_blocks : {1, 5, 16, 17, 100, 128, 129, 257, 4096}) {
        INFO(max_blocks << " blocks");
        int64_t most = 0;
        for (int64_t n = 1; n <= max_blocks * kKvBlockSize; ++n) most = std::max(most, decode_live_splits(n));
        CHECK(decode_grid_splits(max_blocks) == most);
    }
}
