#pragma once
// A draft tree's row's keys by position, host and device alike. The decode attention kernel
// reads a tree row's keys in position order, through this map from position to cache slot, so
// that the row sums them as plain decoding at its position would: the same splits, the same
// order, the same bits (Device::decode_attention).
#include <cstdint>

#include "gpu/kernels/block_common.h"

namespace strata::gpu::blocks {

STRATA_HD int set_bits(uint64_t m) {
#if defined(__CUDA_ARCH__)
    return __popcll(m);
#else
    return __builtin_popcountll(m);
#endif
}
STRATA_HD int lowest_set_bit(uint64_t m) {  // m != 0
#if defined(__CUDA_ARCH__)
    return __ffsll(static_cast<long long>(m)) - 1;
#else
    return __builtin_ctzll(m);
#endif
}

// The cache slot of the key at `position` for a row whose tree starts at slot (and position)
// `base`, its ancestors' and its own slots from base the set bits of `mask` (`words` words of
// 64): a position before the tree is its own slot, position base + k the k-th set bit's; -1
// past the row's keys.
STRATA_HD int64_t tree_key_slot(const uint64_t* mask, int32_t words, int64_t base, int64_t position) {
    if (position < base) return position;
    int64_t k = position - base;
    for (int32_t w = 0; w < words; ++w) {
        uint64_t m = mask[w];
        const int n = set_bits(m);
        if (k >= n) {
            k -= n;
            continue;
        }
        for (; k > 0; --k) m &= m - 1;  // the k set bits below it dropped
        return base + 64 * int64_t(w) + lowest_set_bit(m);
    }
    return -1;
}

}  // namespace strata::gpu::blocks
