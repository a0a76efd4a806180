// The decode attention kernel's map from a tree row's key positions to cache slots
// (gpu/kernels/tree_keys.h), on the host, against counting the mask's bits one by one.
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <vector>

#include "gpu/kernels/tree_keys.h"

using strata::gpu::blocks::tree_key_slot;

TEST_CASE("a tree row's key at position base + k is the slot of its mask's k-th set bit", "[unit][gpu]") {
    std::mt19937_64 rng(95);
    for (int32_t words = 1; words <= 3; ++words)
        for (int trial = 0; trial < 50; ++trial) {
            std::vector<uint64_t> mask(static_cast<size_t>(words), 0);
            for (uint64_t& w : mask) w = rng() & rng();  // about a quarter of the bits
            if (trial == 0) mask.assign(size_t(words), 0), mask.back() = uint64_t{1} << 63;  // one key, the last bit
            const int64_t base = int64_t(rng() % 1000);
            INFO(words << " words, trial " << trial);
            for (int64_t p = 0; p < base; p += 97) CHECK(tree_key_slot(mask.data(), words, base, p) == p);
            int64_t position = base;
            for (int64_t bit = 0; bit < 64 * words; ++bit)
                if (mask[size_t(bit / 64)] >> (bit % 64) & 1) CHECK(tree_key_slot(mask.data(), words, base, position++) == base + bit);
            CHECK(tree_key_slot(mask.data(), words, base, position) == -1);  // past the row's keys
        }
}
