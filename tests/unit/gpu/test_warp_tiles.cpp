// Which rows and tiles each warp of a decode matmul launch reads (gpu/kernels/warp_tiles.h), on
// the host: every warp of every thread block walked as the tile kernel walks it, for launches of
// one to three parts, every grid from one thread block to more than the items, every width of
// row. Each tile of each part's rows must be read exactly once, within the work item that stores
// its row, and no warp may be left with a tile when its thread block's items are done.
#include <catch2/catch.hpp>

#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "gpu/kernels/warp_tiles.h"

using namespace strata::gpu::blocks;

namespace {

LaunchItems launch_of(const std::vector<int64_t>& rows, int warps_per_row) {
    LaunchItems l{};
    l.n = static_cast<int>(rows.size());
    const int64_t per_item = kMatvecWarps / warps_per_row;
    for (size_t i = 0; i < rows.size(); ++i) {
        l.first[i] = l.items;
        l.n_rows[i] = rows[i];
        l.items += static_cast<unsigned>((rows[i] + per_item - 1) / per_item);
    }
    return l;
}

// (part, row, first chunk) -> times read.
using Reads = std::map<std::tuple<int, int64_t, int64_t>, int>;

// Every warp of every thread block as matvec_tile_kernel walks them.
Reads walk(const LaunchItems& l, unsigned grid, int warps_per_row, int64_t chunks) {
    Reads reads;
    for (unsigned block = 0; block < grid; ++block)
        for (int warp = 0; warp < kMatvecWarps; ++warp) {
            const WarpTiles tiles{l, grid, warps_per_row, warp, chunks};
            WarpTile at = tiles.first(block);
            for (unsigned item = block; item < l.items; item += grid) {
                const ItemPart ip = l.part_of(item);
                while (at.item == item) {
                    // Read where its row is stored: this item's row for this warp.
                    REQUIRE(at.part == ip.part);
                    REQUIRE(at.row == item_row(ip.block, warp, warps_per_row));
                    ++reads[{at.part, at.row, at.c0}];
                    at = tiles.after(at);
                }
                REQUIRE(at.item > item);
            }
            REQUIRE(at.item >= l.items);
        }
    return reads;
}

}  // namespace

TEST_CASE("decode matmul warps: every tile of every part's rows read once, in the work item that stores its row", "[unit]") {
    const std::vector<std::vector<int64_t>> launches = {{1}, {7}, {64}, {256, 64, 64}, {5, 3}, {13, 1, 9}};
    for (const auto& rows : launches)
        for (int warps_per_row : {1, 2, 4})
            for (int64_t chunks : std::vector<int64_t>{1, kTileChunks - 1, kTileChunks, 2 * kTileChunks, 7 * kTileChunks + 5, 448})
                for (unsigned grid : {1u, 2u, 3u, 5u, 17u, 1188u}) {
                    const LaunchItems l = launch_of(rows, warps_per_row);
                    const unsigned g = grid < l.items ? grid : l.items;
                    INFO("parts " << rows.size() << " first rows " << rows[0] << ", " << warps_per_row
                                  << " warps a row, " << chunks << " chunks, grid " << g);
                    const Reads reads = walk(l, g, warps_per_row, chunks);
                    Reads expected;
                    for (size_t p = 0; p < rows.size(); ++p)
                        for (int64_t r = 0; r < rows[p]; ++r)
                            for (int64_t c0 = 0; c0 < chunks; c0 += kTileChunks) expected[{int(p), r, c0}] = 1;
                    REQUIRE(reads == expected);
                }
}
