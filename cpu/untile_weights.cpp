// The inverse of tile_weights. A packer's loads only move bytes (gathers, transposes, truncating
// conversions), so where each byte of a tiled tile came from is found by tiling tiles whose
// bytes name their own position, one byte of the position at a time. From that map a tile's
// file layout is gathered back: every byte of the file's tile is read from one place the tiled
// tile holds it, two bytes at a time where the loads keep every aligned pair of bytes together
// (all types but MXFP4, whose blocks are 17 bytes), sixteen pairs (or bytes) to an AVX-512 gather.
#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "cpu/cpu_features.h"
#include "cpu/gemm_x86.h"
#include "cpu/quant.h"
#include "cpu/thread_pool.h"

namespace strata::cpu {
namespace {

constexpr int64_t kTileRows = 16;  // tile_weights' row tile
constexpr uint32_t kUnset = UINT32_MAX;

struct GatherMap {
    std::vector<uint32_t> byte_at;  // for each byte of the file's tile, where the tiled tile holds it
    std::vector<uint32_t> pair_at;  // the same for each aligned pair of bytes; empty where pairs split
};

// Empty where some byte is held nowhere (Q8_K's block sums, which its packer never loads);
// nullopt where the active path has no tiled layout for the type.
std::optional<GatherMap> gather_map_of(DType type, size_t stride, int64_t n_cols) {
    const size_t n = kTileRows * stride;
    std::vector<uint32_t> tiled_from(n, 0);  // tiled byte i came from file byte tiled_from[i]
    std::vector<uint8_t> plane(n);
    for (int shift = 0; shift < 32 && (n - 1) >> shift; shift += 8) {
        for (size_t p = 0; p < n; ++p) plane[p] = uint8_t(p >> shift);
        if (!tile_weights(type, plane.data(), kTileRows, n_cols)) return std::nullopt;
        for (size_t i = 0; i < n; ++i) tiled_from[i] |= uint32_t(plane[i]) << shift;
    }
    GatherMap m;
    m.byte_at.assign(n, kUnset);
    for (size_t i = 0; i < n; ++i)
        if (tiled_from[i] < n && m.byte_at[tiled_from[i]] == kUnset) m.byte_at[tiled_from[i]] = uint32_t(i);
    if (std::find(m.byte_at.begin(), m.byte_at.end(), kUnset) != m.byte_at.end()) return GatherMap{};
    bool pairs = n % 2 == 0;
    for (size_t k = 0; pairs && k < n; k += 2) pairs = m.byte_at[k + 1] == m.byte_at[k] + 1;
    if (pairs)
        for (size_t k = 0; k < n; k += 2) m.pair_at.push_back(m.byte_at[k]);
    return m;
}

// Built once per type and row length, as a model has few of them (the layout is the AVX-512
// packers': only on that path); nullopt where the active path has no tiled layout for the type,
// an empty map where some byte is held nowhere.
const std::optional<GatherMap>& gather_map(DType type, size_t stride, int64_t n_cols) {
    static const std::optional<GatherMap> none;
    if (active_path() != CpuPath::Avx512) return none;
    static std::mutex mutex;
    static std::map<std::pair<DType, size_t>, std::optional<GatherMap>> maps;
    std::lock_guard lock(mutex);
    auto it = maps.find({type, stride});
    if (it == maps.end()) it = maps.emplace(std::pair{type, stride}, gather_map_of(type, stride, n_cols)).first;
    return it->second;
}

}  // namespace

bool can_untile(DType weight_type, int64_t n_cols) {
    const std::optional<GatherMap>& m = gather_map(weight_type, row_bytes(weight_type, n_cols), n_cols);
    return !m || !m->byte_at.empty();
}

bool untile_weights(DType weight_type, const void* tiled, void* dst, int64_t n_rows, int64_t n_cols) {
    const size_t stride = row_bytes(weight_type, n_cols);
    const std::optional<GatherMap>& found = gather_map(weight_type, stride, n_cols);
    if (!found || found->byte_at.empty()) return false;
    const GatherMap* m = &*found;
    const int64_t n_tiles = n_rows / kTileRows;
    const auto* src = static_cast<const uint8_t*>(tiled);
    auto* out = static_cast<uint8_t*>(dst);
    if (n_tiles > 0) {
        const size_t tile_bytes = kTileRows * stride;
        parallel_for(n_tiles, [&](int64_t t) {
            const uint8_t* from = src + size_t(t) * tile_bytes;
            uint8_t* to = out + size_t(t) * tile_bytes;
            // A gather reads up to three bytes past what it takes: not past the matrix's last tile.
            if (t + 1 == n_tiles) {
                const uint32_t* at = m->byte_at.data();
                for (size_t b = 0; b < tile_bytes; ++b) to[b] = from[at[b]];
            } else if (!m->pair_at.empty()) {
                avx512_gather_pairs(from, m->pair_at.data(), m->pair_at.size(), to);
            } else {
                avx512_gather_bytes(from, m->byte_at.data(), tile_bytes, to);
            }
        });
    }
    // A partial last tile stays in the file's layout.
    const size_t done = size_t(n_tiles) * kTileRows * stride;
    std::memcpy(out + done, src + done, size_t(n_rows) * stride - done);
    return true;
}

}  // namespace strata::cpu
