// AVX-512 VNNI matmul for the block-quantized weight types against Q8x2 activations
// (quant_ref.h). Built with -mavx512* flags for this file only; quant.cpp calls in here only when
// cpu_features() says the CPU can.
//
// Layout: 16 weight rows at a time are "packed" per block of 32 values into 8 vectors whose lane
// r holds 4 unsigned weight bytes of row r (values 4k..4k+3 of the block), plus a vector of the
// 16 rows' scales (and mins). Each dpbusd then multiplies those 16 rows by the same 4 activation
// bytes, broadcast from memory, so one instruction serves 16 output rows and the per-block
// scaling is one fused multiply-add for 16 rows. Packing reads the 16 rows either as laid out in
// the file (128/256-bit loads of each row's block, a dword transpose, gathers for the scales) or
// as tile_weights rewrote them at load, in place (the same loads' results stored in order, read
// back linearly): a resident model is tiled once, streamed layers are packed as read.
//   decode (up to 4-8 tokens by type: max_fused_tokens): pack each block into L1 and use it at
//   once for every token;
//   prefill: pack up to 64 rows x all of K into a per-thread buffer once, then run every group
//   of 8 tokens over it (the buffer stays in L2, the 8 activation rows in L1/L2).
// Measured on one Sapphire Rapids core (K = 2048, 5632 rows of Q4_0): packing + 1 token 13-17
// GB/s of weights; 8 tokens on packed tiles ~105 GMAC/s (two-level, 4 dpbusd per 64 MACs pair).
//
// Exactness: per block the integer dot I = sum q*c is exact (c = 256*hi + lo; see the bounds in
// quant_ref.cpp); weights with an offset (Q4_0: q - 8) use I_unsigned - 8 * s32, also exact; the
// float part is (scale * dc) * float(I) [+ min * dcs], as the reference, summed in another order.
#include <immintrin.h>

#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <type_traits>

#include "core/error.h"
#include "cpu/gemm_x86.h"
#include "cpu/packers_avx512.h"
#include "cpu/quant_ref.h"
#include "cpu/thread_pool.h"

namespace strata::cpu {
namespace {

using namespace pack;

// ---------------------------------------------------------------- the kernel
struct ActPtrs {
    const int8_t* hi;
    const int8_t* lo;
    const float* dc;
    const float* dcs;
    const int32_t* s32;
    const int32_t* s16;
};

// Packed block ab of NS tiles (16 rows each) for NT tokens, accumulated into acc[s][t]: each
// activation broadcast serves the NS tiles. kSplit16 types (Q6_K, Q3_K, Q2_K) keep the integer
// dots of values 0-15 and 16-31 apart: they have separate scales (Q2_K separate minimums too,
// applied through each half's activation sum s16).
// Always inlined: left to the compiler, the codebook types' larger packers (IQ4_NL, MXFP4) made it
// call this per block, spilling the packed block and the accumulators (half their decode rate).
template <class P, int NT, int NS = 1>
__attribute__((always_inline)) inline void block_step(const PackedOf<P>* const* pk, int64_t ab, const ActPtrs* a,
                                                      __m512 (*acc)[NT]) {
    constexpr int kParts = P::kSplit16 ? 2 : 1;
    __m512i ih[NS][kParts][NT], il[NS][kParts][NT];
#pragma GCC unroll 2
    for (int s = 0; s < NS; ++s)
#pragma GCC unroll 2
        for (int h = 0; h < kParts; ++h)
#pragma GCC unroll 16
            for (int t = 0; t < NT; ++t) ih[s][h][t] = il[s][h][t] = _mm512_setzero_si512();
    const int64_t v0 = ab * 32;
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
        const int h = P::kSplit16 ? k / 4 : 0;
#pragma GCC unroll 16
        for (int t = 0; t < NT; ++t) {
            const __m512i hi = bcast4(a[t].hi + v0 + 4 * k);
            const __m512i lo = P::kLo ? bcast4(a[t].lo + v0 + 4 * k) : hi;
#pragma GCC unroll 2
            for (int s = 0; s < NS; ++s) {
                ih[s][h][t] = _mm512_dpbusd_epi32(ih[s][h][t], pk[s]->w[k], hi);
                if constexpr (P::kLo) il[s][h][t] = _mm512_dpbusd_epi32(il[s][h][t], pk[s]->w[k], lo);
            }
        }
    }
#pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) {
        const __m512 dc = _mm512_set1_ps(a[t].dc[ab]);
#pragma GCC unroll 2
        for (int s = 0; s < NS; ++s) {
#pragma GCC unroll 2
            for (int h = 0; h < kParts; ++h) {
                __m512i i = _mm512_slli_epi32(ih[s][h][t], 8);
                if constexpr (P::kLo) i = _mm512_add_epi32(i, il[s][h][t]);
                if constexpr (P::kSplit16) i = _mm512_sub_epi32(i, _mm512_set1_epi32(P::kOff * a[t].s16[2 * ab + h]));
                else if constexpr (P::kOff != 0) i = _mm512_sub_epi32(i, _mm512_set1_epi32(P::kOff * a[t].s32[ab]));
                acc[s][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i), _mm512_mul_ps(pk[s]->scale[h], dc), acc[s][t]);
                if constexpr (P::kMin) {  // min * dc * (sum of the activations it applies to)
                    const float dcs = P::kSplit16 ? a[t].dc[ab] * float(a[t].s16[2 * ab + h]) : a[t].dcs[ab];
                    acc[s][t] = _mm512_fmadd_ps(pk[s]->min[h], _mm512_set1_ps(dcs), acc[s][t]);
                }
            }
        }
    }
}

inline ActPtrs act_ptrs(const MatmulJob& job, int64_t t) {
    const ActQ8x2 v = act_q8x2(job.acts + t * job.a_stride, job.n_cols);
    return {v.hi, v.lo, v.dc, v.dcs, v.s32, v.s16};
}
inline void store_rows(float* y, __m512 v, int n_valid) {
    if (n_valid >= 16) _mm512_storeu_ps(y, v);
    else _mm512_mask_storeu_ps(y, __mmask16((1u << n_valid) - 1), v);
}

// Decode: NS tiles of 16 rows, NT tokens, each block packed into L1 and used at once, with
// software prefetch (below). NS = 2 takes two tiles from the two halves of the task together,
// block by block: two streams in flight, and each activation broadcast serves 32 rows (the
// second tile's blocks of a call pass through L1 when a call packs several).
struct DecodeTile {
    RowTile tile;
    const uint8_t* next;  // the tile to prefetch into L2 in the file layout; null for none
    float* y;
};
template <class P, int NT, int NS>
void tile_fused(const DecodeTile* tiles, size_t stride, const MatmulJob& job) {
    static_assert(NS <= 2);
    ActPtrs a[NT];
    #pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) a[t] = act_ptrs(job, t);
    __m512 acc[NS][NT];
    #pragma GCC unroll 2
    for (int s = 0; s < NS; ++s)
    #pragma GCC unroll 16
        for (int t = 0; t < NT; ++t) acc[s][t] = _mm512_setzero_ps();
    const __m512i idx = row_offsets(stride);
    const int64_t nb = job.n_cols / P::kBlock;
    // Prefetches, a few lines per block (not a call's worth at once, whose burst would fill the
    // line fill buffers and stall the loads this block needs); they never fault: no bounds checks.
    //   tiled: the tile is read linearly (and runs on into the next tile): about 1 KiB ahead into
    //     L1 and about 4 KiB ahead into L2, in whole calls. Against prefetching only the next
    //     tile into L2 (as below), decode measured Q4_0 +10%, Q8_0 +11%, Q4_K +8-13%, SmolLM2 the
    //     same; without the L2 prefetch SmolLM2 lost 14%, with 2 KiB into L1 Q8_0 lost 5%.
    //   file layout: the 16 rows are read strided, so the next tile (16 * stride contiguous
    //     bytes = nb * kTileBlockBytes) goes to L2 in step with this tile's blocks.
    constexpr int kTileBlockBytes = kRowTile * P::kBlockBytes / P::kPerCall;
    constexpr int kLinesPerBlock = (kTileBlockBytes + 63) / 64;
    constexpr auto whole_calls = [](int bytes) {
        constexpr int kCallBytes = kRowTile * P::kBlockBytes;
        return (bytes + kCallBytes - 1) / kCallBytes * kCallBytes;
    };
    constexpr int kL1Ahead = whole_calls(1024), kL2Ahead = whole_calls(4096);
    auto prefetch = [&](int s, int64_t b) __attribute__((always_inline)) {
        const DecodeTile& t = tiles[s];
        if (t.tile.tiled) {
            const uint8_t* at = t.tile.p + b * kTileBlockBytes;
    #pragma GCC unroll 16
            for (int l = 0; l < kLinesPerBlock; ++l) {
                _mm_prefetch(reinterpret_cast<const char*>(at + kL1Ahead + 64 * l), _MM_HINT_T0);
                _mm_prefetch(reinterpret_cast<const char*>(at + kL2Ahead + 64 * l), _MM_HINT_T1);
            }
        } else if (t.next) {
    #pragma GCC unroll 16
            for (int l = 0; l < kLinesPerBlock; ++l)
                _mm_prefetch(reinterpret_cast<const char*>(t.next + b * kTileBlockBytes + 64 * l), _MM_HINT_T1);
        }
    };
    for (int64_t c = 0; c < nb / P::kPerCall; ++c) {
        if constexpr (NS == 1) {
            pack_call<P>(tiles[0].tile, stride, idx, c, [&](int j, const PackedOf<P>& pk) __attribute__((always_inline)) {
                const int64_t b = c * P::kPerCall + j;
                prefetch(0, b);
                const PackedOf<P>* one = &pk;
                block_step<P, NT>(&one, b, a, acc);
            });
        } else {
            // The second tile's blocks of this call go through L1, the first's straight to use.
            PackedOf<P> second[P::kPerCall];
            pack_call<P>(tiles[1].tile, stride, idx, c,
                         [&](int j, const PackedOf<P>& p) __attribute__((always_inline)) { second[j] = p; });
            pack_call<P>(tiles[0].tile, stride, idx, c, [&](int j, const PackedOf<P>& pk) __attribute__((always_inline)) {
                const int64_t b = c * P::kPerCall + j;
                prefetch(0, b);
                prefetch(1, b);
                const PackedOf<P>* ptrs[2] = {&pk, &second[j]};
                block_step<P, NT, 2>(ptrs, b, a, acc);
            });
        }
    }
    #pragma GCC unroll 2
    for (int s = 0; s < NS; ++s)
    #pragma GCC unroll 16
        for (int t = 0; t < NT; ++t) store_rows(tiles[s].y + t * job.ldy, acc[s][t], tiles[s].tile.n_valid);
}

// Prefill: NT tokens over a packed tile of nb blocks.
template <class P, int NT>
void tile_packed(const PackedOf<P>* pk, int64_t nb, const MatmulJob& job, int64_t t0, float* y, int n_valid) {
    ActPtrs a[NT];
    #pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) a[t] = act_ptrs(job, t0 + t);
    __m512 acc[NT];
    #pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
        const PackedOf<P>* one = &pk[b];
        block_step<P, NT>(&one, b, a, &acc);
    }
    #pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) store_rows(y + (t0 + t) * job.ldy, acc[t], n_valid);
}

// Up to this many tokens each block is packed once and used at once for every token, without
// the prefill's pass through a packed buffer: as many as the accumulators and the packed block
// keep in registers (one tile at a time beyond 4 tokens: two tiles' accumulators spill). Blocks
// of one scale: 8 tokens (SmolLM2's 1536 x 576 Q4_1 matrices, tiled, read from DRAM: 5 tokens
// 22 us against 34 packed, 8 tokens 29 against 43); super-blocks (K types): 6; two scales a
// block (Q6_K, Q3_K, Q2_K, twice the accumulators): 4, beyond which they lose to the packed path.
template <class P>
constexpr int max_fused_tokens() {
    return P::kSplit16 ? 4 : P::kPerCall > 1 ? 6 : 8;
}
// Beyond 4 tokens for tiled weights only: in the file layout one tile at a time reads its 16
// strided rows with too little in flight, and the packed path wins (Q4_1 at 5 tokens: 9.3 GB/s
// of weights against 13.6; `strata_kernel_bench --decode --tokens 5`).
template <class P>
int fused_tokens(const MatmulJob& job) {
    return job.w_tiled ? max_fused_tokens<P>() : 4;
}
template <class P, template <class, int> class F, class... Args>
void by_tokens_fused(int nt, Args&&... args) {
    constexpr int kMax = max_fused_tokens<P>();
    switch (nt) {
        case 1: return F<P, 1>::run(args...);
        case 2: return F<P, 2>::run(args...);
        case 3: return F<P, 3>::run(args...);
        case 4: return F<P, 4>::run(args...);
        default: break;
    }
    if constexpr (kMax >= 6) {
        if (nt == 5) return F<P, 5>::run(args...);
        if (nt == 6) return F<P, 6>::run(args...);
    }
    if constexpr (kMax >= 8) {
        if (nt == 7) return F<P, 7>::run(args...);
        if (nt == 8) return F<P, 8>::run(args...);
    }
    STRATA_ASSERT(!"more tokens than the fused decode kernel takes");
}
template <class P, template <class, int> class F, class... Args>
void by_tokens(int nt, Args&&... args) {
    switch (nt) {
        case 1: F<P, 1>::run(args...); break;
        case 2: F<P, 2>::run(args...); break;
        case 3: F<P, 3>::run(args...); break;
        case 4: F<P, 4>::run(args...); break;
        case 5: F<P, 5>::run(args...); break;
        case 6: F<P, 6>::run(args...); break;
        case 7: F<P, 7>::run(args...); break;
        default: F<P, 8>::run(args...); break;
    }
}
template <class P, int NT>
struct Fused {
    static void run(const DecodeTile* tiles, int n_tiles, size_t stride, const MatmulJob& job) {
        if constexpr (NT <= 4) {  // two tiles' accumulators beyond 4 tokens spill
            if (n_tiles == 2) return tile_fused<P, NT, 2>(tiles, stride, job);
        }
        for (int s = 0; s < n_tiles; ++s) tile_fused<P, NT, 1>(tiles + s, stride, job);
    }
};
template <class P, int NT>
struct OnPacked {
    static void run(const PackedOf<P>* pk, int64_t nb, const MatmulJob& job, int64_t t0, float* y, int n_valid) {
        tile_packed<P, NT>(pk, nb, job, t0, y, n_valid);
    }
};

constexpr int kTokenGroup = 8;       // prefill: tokens per kernel pass
constexpr int64_t kTilesPerPack = 4; // prefill: row tiles packed together (activations reused 4x)

// Rows [r0, r1) (r0 a multiple of 16) for every token.
template <class P>
void matmul_rows_impl(const MatmulJob& job, int64_t r0, int64_t r1) {
    const size_t stride = job.w_stride;
    const int64_t nb = job.n_cols / P::kBlock;
    if (job.n_tok <= fused_tokens<P>(job)) {
        // The task's tiles as two streams, its first and second halves, taken together.
        const int64_t n_tiles = (r1 - r0 + kRowTile - 1) / kRowTile, half = (n_tiles + 1) / 2;
        auto decode_tile = [&](int64_t i) {
            const int64_t r = r0 + i * kRowTile;
            // the next tile of the matrix; none past it
            const uint8_t* next = r + 2 * kRowTile <= job.n_rows ? job.w + (r + kRowTile) * stride : nullptr;
            return DecodeTile{tile_rows(job, r, r1), next, job.y + r};
        };
        for (int64_t i = 0; i < half; ++i) {
            const bool pair = i + half < n_tiles;
            const DecodeTile tiles[2] = {decode_tile(i), pair ? decode_tile(i + half) : DecodeTile{}};
            by_tokens_fused<P, Fused>(static_cast<int>(job.n_tok), tiles, pair ? 2 : 1, stride, job);
        }
        return;
    }
    auto* pk = reinterpret_cast<PackedOf<P>*>(thread_scratch(0, sizeof(PackedOf<P>) * nb * kTilesPerPack));
    int n_valid[kTilesPerPack];
    for (int64_t rc = r0; rc < r1; rc += kRowTile * kTilesPerPack) {
        const int64_t n_tiles = pack_tiles<P>(job, rc, r1, kTilesPerPack, pk, n_valid);
        for (int64_t t0 = 0; t0 < job.n_tok; t0 += kTokenGroup) {
            const int nt = static_cast<int>(std::min<int64_t>(kTokenGroup, job.n_tok - t0));
            for (int64_t i = 0; i < n_tiles; ++i)
                by_tokens<P, OnPacked>(nt, pk + i * nb, nb, job, t0, job.y + rc + i * kRowTile, n_valid[i]);
        }
    }
}

template <class P>
void matmul_rows_q(const MatmulJob& job, int64_t r0, int64_t r1) {
    if (job.skip_lo) matmul_rows_impl<WithLo<P, false>>(job, r0, r1);
    else matmul_rows_impl<WithLo<P, true>>(job, r0, r1);
}

// In place: each full tile is copied aside and its packer's loads, recorded, written over it
// (the same bytes or fewer: RecordingRows stores what the loads return, which is what the
// tile's bytes hold, rearranged).
template <class P>
void tile_weights_impl(uint8_t* w, size_t stride, int64_t n_rows) {
    const __m512i idx = row_offsets(stride);
    const int64_t n_calls = static_cast<int64_t>(stride / P::kBlockBytes);
    constexpr size_t kCallBytes = kRowTile * P::kBlockBytes;
    parallel_for(n_rows / kRowTile, [&](int64_t tile_index) {
        uint8_t* tile = w + tile_index * kRowTile * stride;
        uint8_t* copy = thread_scratch(1, kRowTile * stride);
        std::memcpy(copy, tile, kRowTile * stride);
        for (int64_t c = 0; c < n_calls; ++c) {
            RecordingRows src{{copy + c * P::kBlockBytes, stride, idx}, tile + c * kCallBytes};
            P::pack(src, [](int, const PackedOf<P>&) {});
            STRATA_ASSERT(src.out <= tile + (c + 1) * kCallBytes);
        }
    });
}

// The 16 rows of a tiled tile, value by value as dequantize_row computes them from the file's
// layout: scale * (q - kOff) [+ min] (kSplit16: the scale and min of each half of the block),
// multiplied, then added, never fused. Row r goes to dst + r * ld.
template <class P>
void tiled_rows_impl(const uint8_t* tile, size_t stride, int64_t n_cols, float* dst, size_t ld) {
    constexpr int kHalves = P::kSplit16 ? 2 : 1;
    const RowTile t{tile, static_cast<int>(kRowTile), true};
    const __m512i unused = _mm512_setzero_si512(), off = _mm512_set1_epi32(P::kOff);
    const __m256i row_dwords = _mm256_setr_epi32(0, 16, 32, 48, 64, 80, 96, 112);  // w[k] dword r, k < 8
    for (int64_t c = 0; c < n_cols / (P::kBlock * P::kPerCall); ++c)
        pack_call<P>(t, stride, unused, c, [&](int j, const PackedOf<P>& pk) {
            alignas(64) int32_t w[8 * 16];
            alignas(64) float scale[kHalves][16], min[kHalves][16];
            for (int k = 0; k < 8; ++k) _mm512_store_si512(w + 16 * k, pk.w[k]);
            for (int h = 0; h < kHalves; ++h) {
                _mm512_store_ps(scale[h], pk.scale[h]);
                if constexpr (P::kMin) _mm512_store_ps(min[h], pk.min[h]);
            }
            const int64_t v0 = (c * P::kPerCall + j) * P::kBlock;
            for (int r = 0; r < kRowTile; ++r) {
                const __m256i bytes = _mm256_i32gather_epi32(w + r, row_dwords, 4);  // row r's 32 values
                float* y = dst + r * ld + v0;
                for (int g = 0; g < 2; ++g) {
                    const int h = kHalves == 2 ? g : 0;
                    const __m128i part = g == 0 ? _mm256_castsi256_si128(bytes) : _mm256_extracti128_si256(bytes, 1);
                    const __m512 q = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_cvtepu8_epi32(part), off));
                    __m512 f = _mm512_mul_ps(_mm512_set1_ps(scale[h][r]), q);
                    if constexpr (P::kMin) f = _mm512_add_ps(f, _mm512_set1_ps(min[h][r]));
                    _mm512_storeu_ps(y + 16 * g, f);
                }
            }
        });
}

}  // namespace

TiledRowsFn avx512_tiled_rows(DType type) {
    return with_packer<TiledRowsFn>(type, []<class P, DType>() -> TiledRowsFn { return tiled_rows_impl<P>; });
}

TileWeightsFn avx512_tile_weights(DType type) {
    return with_packer<TileWeightsFn>(type, []<class P, DType>() -> TileWeightsFn { return tile_weights_impl<P>; });
}

MatmulRowsFn avx512_vnni_matmul(DType type) {
    return with_packer<MatmulRowsFn>(type, []<class P, DType>() -> MatmulRowsFn { return matmul_rows_q<P>; });
}

}  // namespace strata::cpu
