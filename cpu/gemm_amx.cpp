// AMX-INT8 prefill for the block-quantized weight types against Q8x2 activations. Built with
// -mamx-tile -mamx-int8 and the AVX-512 flags for this file only; used only where amx_usable().
//
// Per block of 32 values and tile of 16 tokens x 16 weight rows: the activations' hi and lo
// bytes are two A tiles (16 token rows x 32 bytes, straight from the Q8x2 rows), the packed
// weights (pack_avx512.h) are the B tile as they are, and two TDPBSUD (signed x unsigned) give
// the exact integer dots of hi and lo. The tiles are stored, and AVX-512 finishes the block as
// the VNNI kernel does: I = (hi << 8) + lo [- offset * s], acc += float(I) * (scale * dc)
// [+ min * dcs]. The per-block float step (the weights and activations each have a scale per
// block) is most of the work; the multiplies themselves cost little.
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <atomic>
#include <cpuid.h>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "core/log.h"
#include "cpu/gemm_x86.h"
#include "cpu/packers_avx512.h"

namespace strata::cpu {
namespace {

using namespace pack;

// Tile registers, two sets so that block b+1's tile multiplies run while AVX-512 finishes block b:
// 0/1 and 5/6 = C hi/lo (16 x 16 int32), 2/3 = A hi/lo (16 x 32 bytes), 4 and 7 = B (8 x 64 bytes).
struct alignas(64) TileConfig {
    uint8_t palette = 1;
    uint8_t start_row = 0;
    uint8_t reserved[14] = {};
    uint16_t colsb[16] = {};
    uint8_t rows[16] = {};
};
const TileConfig& tile_config() {
    static const TileConfig cfg = [] {
        TileConfig c;
        c.colsb[0] = c.colsb[1] = 64, c.rows[0] = c.rows[1] = 16;
        c.colsb[2] = c.colsb[3] = 32, c.rows[2] = c.rows[3] = 16;
        c.colsb[4] = 64, c.rows[4] = 8;
        c.colsb[5] = c.colsb[6] = 64, c.rows[5] = c.rows[6] = 16;
        c.colsb[7] = 64, c.rows[7] = 8;
        return c;
    }();
    return cfg;
}
// Tile configuration is per thread, and other AMX users on the same thread (oneDNN's bf16
// prefill, onednn_matmul.h) release or replace it: loaded at every kernel call (one
// instruction per row range, against milliseconds of tile work).
void configure_tiles() { _tile_loadconfig(&tile_config()); }

constexpr int64_t kTilesPerPack = 4; // row tiles packed together, as in the VNNI prefill

// 16 tokens (rows of `hi`/`lo` a_stride apart; a tail is padded by the caller) x one packed tile.
// The integer part of block b into tile set 0 (C tiles 0/1, B tile 4) or 1 (5/6, 7).
// (The tile intrinsics need literal register numbers.)
template <int kSet, bool kLo>
inline void tile_block(const ActQ8x2& v0, size_t a_stride, const Packed& pk, int64_t b) {
    _tile_loadd(2, v0.hi + 32 * b, a_stride);
    if constexpr (kLo) _tile_loadd(3, v0.lo + 32 * b, a_stride);
    if constexpr (kSet == 0) {
        _tile_zero(0);
        _tile_loadd(4, pk.w, 64);
        _tile_dpbsud(0, 2, 4);
        if constexpr (kLo) {
            _tile_zero(1);
            _tile_dpbsud(1, 3, 4);
        }
    } else {
        _tile_zero(5);
        _tile_loadd(7, pk.w, 64);
        _tile_dpbsud(5, 2, 7);
        if constexpr (kLo) {
            _tile_zero(6);
            _tile_dpbsud(6, 3, 7);
        }
    }
}
template <int kSet, bool kLo>
inline void store_block(int32_t (*c_hi)[16], int32_t (*c_lo)[16]) {
    if constexpr (kSet == 0) {
        _tile_stored(0, c_hi, 64);
        if constexpr (kLo) _tile_stored(1, c_lo, 64);
    } else {
        _tile_stored(5, c_hi, 64);
        if constexpr (kLo) _tile_stored(6, c_lo, 64);
    }
}

// Per block, the 16 tokens' activation scale, dc * s32 and kOff * s32, gathered once per group
// of 16 tokens so the per-block step broadcasts them straight from L1.
struct TokenScales {
    float* dc;     // [nb][16]
    float* dcs;    // [nb][16]
    int32_t* off;  // [nb][16]
};
template <class P>
void gather_scales(const uint8_t* acts, size_t a_stride, int64_t n_cols, TokenScales ts) {
    const int64_t nb = n_cols / 32;
    for (int m = 0; m < 16; ++m) {
        const ActQ8x2 v = act_q8x2(acts + m * a_stride, n_cols);
        for (int64_t b = 0; b < nb; ++b) {
            ts.dc[b * 16 + m] = v.dc[b];
            ts.dcs[b * 16 + m] = v.dcs[b];
            ts.off[b * 16 + m] = P::kOff * v.s32[b];
        }
    }
}

// 16 tokens (rows a_stride apart from `acts`; a tail is padded by the caller) x one packed tile.
template <class P>
void amx_tile(const Packed* pk, int64_t nb, const uint8_t* acts, size_t a_stride, int64_t n_cols, const TokenScales& ts,
              int m_valid, float* y, int64_t ldy, int n_valid) {
    alignas(64) int32_t c_hi[16][16], c_lo[16][16];
    __m512 acc[16];
    for (int m = 0; m < 16; ++m) acc[m] = _mm512_setzero_ps();
    const ActQ8x2 v0 = act_q8x2(acts, n_cols);  // token m's planes are m * a_stride further on
    auto finish = [&](int64_t b) {
        const __m512 sc = pk[b].scale[0];
        const float* dc = ts.dc + 16 * b;
        const float* dcs = ts.dcs + 16 * b;
        const int32_t* off = ts.off + 16 * b;
#pragma GCC unroll 16
        for (int m = 0; m < 16; ++m) {
            __m512i i = _mm512_slli_epi32(_mm512_load_si512(c_hi[m]), 8);
            if constexpr (P::kLo) i = _mm512_add_epi32(i, _mm512_load_si512(c_lo[m]));
            if constexpr (P::kOff != 0) i = _mm512_sub_epi32(i, _mm512_set1_epi32(off[m]));
            acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i), _mm512_mul_ps(sc, _mm512_set1_ps(dc[m])), acc[m]);
            if constexpr (P::kMin) acc[m] = _mm512_fmadd_ps(pk[b].min[0], _mm512_set1_ps(dcs[m]), acc[m]);
        }
    };
    // Software pipeline: the tile multiplies of block b+1 are issued before block b's results
    // are stored and finished. (Measured, 2048x2048 Q4_0, 256 tokens, 1 core: 137-140 GMAC/s,
    // VNNI 92-94; without the pipeline 117-125; groups of 4 blocks double-buffered in memory
    // did not help, 125-135: the tile unit's own latency is the limit.)
    tile_block<0, P::kLo>(v0, a_stride, pk[0], 0);
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
        tile_block<1, P::kLo>(v0, a_stride, pk[b + 1], b + 1);
        store_block<0, P::kLo>(c_hi, c_lo);
        finish(b);
        if (b + 2 < nb) tile_block<0, P::kLo>(v0, a_stride, pk[b + 2], b + 2);
        store_block<1, P::kLo>(c_hi, c_lo);
        finish(b + 1);
    }
    if (b < nb) {  // odd block count: the last block is in set 0
        store_block<0, P::kLo>(c_hi, c_lo);
        finish(b);
    }
    const __mmask16 k = n_valid >= 16 ? 0xFFFF : __mmask16((1u << n_valid) - 1);
    for (int m = 0; m < m_valid; ++m) _mm512_mask_storeu_ps(y + m * ldy, k, acc[m]);
}

template <class P>
void amx_matmul_impl(const MatmulJob& job, int64_t r0, int64_t r1) {
    static_assert(!P::kSplit16, "one scale per block of 32");
    configure_tiles();
    const int64_t nb = job.n_cols / P::kBlock;
    auto* pk = reinterpret_cast<Packed*>(thread_scratch(0, sizeof(Packed) * nb * kTilesPerPack));
    auto* scales = reinterpret_cast<float*>(thread_scratch(3, sizeof(float) * 16 * (job.n_cols / 32) * 3));
    const int64_t nab = job.n_cols / 32;
    const TokenScales ts{scales, scales + 16 * nab, reinterpret_cast<int32_t*>(scales + 32 * nab)};
    int n_valid[kTilesPerPack];
    const int64_t full = job.n_tok / 16 * 16;
    for (int64_t rc = r0; rc < r1; rc += kRowTile * kTilesPerPack) {
        const int64_t n_tiles = pack_tiles<P>(job, rc, r1, kTilesPerPack, pk, n_valid);
        for (int64_t t0 = 0; t0 < job.n_tok; t0 += 16) {
            const int m_valid = static_cast<int>(std::min<int64_t>(16, job.n_tok - t0));
            const uint8_t* acts = job.acts + t0 * job.a_stride;
            if (t0 >= full) {  // a partial group of tokens: 16 rows from a zero-padded copy
                uint8_t* tmp = thread_scratch(1, 16 * job.a_stride);
                std::memcpy(tmp, acts, m_valid * job.a_stride);
                std::memset(tmp + m_valid * job.a_stride, 0, (16 - m_valid) * job.a_stride);
                acts = tmp;
            }
            gather_scales<P>(acts, job.a_stride, job.n_cols, ts);
            for (int64_t i = 0; i < n_tiles; ++i)
                amx_tile<P>(pk + i * nb, nb, acts, job.a_stride, job.n_cols, ts, m_valid,
                            job.y + t0 * job.ldy + rc + i * kRowTile, job.ldy, n_valid[i]);
        }
    }
}

template <class P, DType kType>
void amx_matmul_rows(const MatmulJob& job, int64_t r0, int64_t r1) {
    static const MatmulRowsFn vnni = avx512_vnni_matmul(kType);
    if (job.n_tok < kAmxMinTokens || !amx_enabled()) return vnni(job, r0, r1);
    if (job.skip_lo) amx_matmul_impl<WithLo<P, false>>(job, r0, r1);
    else amx_matmul_impl<WithLo<P, true>>(job, r0, r1);
}

bool detect_amx() {
    if (const char* e = std::getenv("STRATA_AMX"); e && std::string_view(e) == "0") return false;
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    const bool tile = d & (1u << 24), int8 = d & (1u << 25);
    if (!tile || !int8) return false;
    // The OS must enable the tile state (XCR0 bits 17 and 18) and let this process use it.
    unsigned lo, hi;
    __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & (3u << 17)) != (3u << 17)) return false;
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) {
        STRATA_LOG_WARN("cpu: AMX present but the kernel refused tile state (arch_prctl); using AVX-512 VNNI");
        return false;
    }
    return true;
}

std::atomic<bool> g_amx_enabled{true};

}  // namespace

bool amx_usable() {
    static const bool usable = detect_amx();
    return usable;
}
bool amx_enabled() { return amx_usable() && g_amx_enabled.load(std::memory_order_relaxed); }
void set_amx_enabled(bool on) { g_amx_enabled.store(on); }

MatmulRowsFn amx_matmul(DType type) {
    return with_packer<MatmulRowsFn>(type, []<class P, DType kType>() -> MatmulRowsFn {
        if constexpr (P::kSplit16) return nullptr;  // two scales per block of 32 (Q6_K, Q3_K, Q2_K): VNNI only
        else return amx_matmul_rows<P, kType>;
    });
}

}  // namespace strata::cpu
