#pragma once
// Which weight rows and tiles each warp of a decode matmul launch reads (matvec.cu), host and
// device alike. A launch holds its parts' rows (a layer's q, k and v: up to kDeviceLaunchProducts
// weights of one width) as work items of kMatvecWarps / warps_per_row rows each, the parts' items
// one after another. Warp w of a thread block works on row w / warps_per_row of its item. A tile
// kernel's thread blocks, no more than the device runs at once, take items block, block + grid,
// ..., and the warp reads tiles w % warps_per_row, + warps_per_row, ... of kTileChunks chunks of
// its row: WarpTiles gives them in that order across items, so that a warp loads its next tile,
// of this row or of a later item's, while it works on this one.
#include <cstdint>

#include "core/kernel_shapes.h"
#include "gpu/kernels/block_types.h"

namespace strata::gpu::blocks {

inline constexpr int kMatvecWarps = 4;  // a thread block's warps

// Work item `item`'s part and its item index within the part.
struct ItemPart {
    int part;
    unsigned block;
};

// The parts of one launch as work items.
struct LaunchItems {
    unsigned first[kDeviceLaunchProducts];  // part i's first item
    int64_t n_rows[kDeviceLaunchProducts];
    int n;           // parts
    unsigned items;  // in all

    STRATA_HD ItemPart part_of(unsigned item) const {
        ItemPart p{0, item};
        // Indices fixed once unrolled, so that the parts stay in the kernel's parameters.
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
        for (int i = 1; i < kDeviceLaunchProducts; ++i)
            if (i < n && item >= first[i]) p = {i, item - first[i]};
        return p;
    }
    STRATA_HD int64_t rows(int part) const {
        int64_t r = n_rows[0];
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
        for (int i = 1; i < kDeviceLaunchProducts; ++i)
            if (part == i) r = n_rows[i];
        return r;
    }
};

// The row warp `warp` of a thread block works on in its part's item `block`.
STRATA_HD int64_t item_row(unsigned block, int warp, int warps_per_row) {
    return int64_t(block) * (kMatvecWarps / warps_per_row) + warp / warps_per_row;
}

// A tile of a warp's: its work item (`items` or more: none left), part and row, first chunk.
struct WarpTile {
    unsigned item;
    int part;
    int64_t row, c0;
};

struct WarpTiles {
    const LaunchItems& launch;
    unsigned grid;  // thread blocks
    int warps_per_row, warp;
    int64_t chunks;  // of a row

    STRATA_HD int64_t first_c0() const { return int64_t(warp % warps_per_row) * kTileChunks; }
    // The warp's first tile from item `item` on (a row past its part's end has none).
    STRATA_HD WarpTile first(unsigned item) const {
        for (; item < launch.items; item += grid) {
            const ItemPart ip = launch.part_of(item);
            const int64_t r = item_row(ip.block, warp, warps_per_row);
            if (first_c0() < chunks && r < launch.rows(ip.part)) return {item, ip.part, r, first_c0()};
        }
        return {launch.items, 0, 0, 0};
    }
    // The warp's tile after t: the next of its row, else its first of a later item.
    STRATA_HD WarpTile after(const WarpTile& t) const {
        const int64_t c0 = t.c0 + int64_t(warps_per_row) * kTileChunks;
        return c0 < chunks ? WarpTile{t.item, t.part, t.row, c0} : first(t.item + grid);
    }
};

}  // namespace strata::gpu::blocks
