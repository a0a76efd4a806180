#pragma once
// Packing of 16 weight rows of a block-quantized type into the layout the AVX-512 VNNI
// (gemm_avx512.cpp) and AMX (gemm_amx.cpp) kernels use: per block of 32 values, 8 vectors
// whose lane r holds 4 unsigned weight bytes of row r (values 4k..4k+3), plus the 16 rows'
// scales and minimums. The 8 vectors are also exactly an AMX B tile (8 rows of 16 x 4 bytes).
// Include only from files built with the AVX-512 flags.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <type_traits>

#include "cpu/gemm_x86.h"
#include "cpu/quant_ref.h"

namespace strata::cpu::pack {


// One packed block. kHalves = 2 for the types whose two halves of 16 values have their own
// scale (and minimum): the packers with kSplit16 (Q6_K, Q3_K, Q2_K).
template <int kHalves>
struct alignas(64) PackedBlock {
    __m512i w[8];           // w[k] lane r: row r's unsigned weight bytes at values 4k..4k+3 of the block
    __m512 scale[kHalves];  // lane r: row r's scale (of values 16h..16h+15 with two halves)
    __m512 min[kHalves];    // lane r: row r's minimum, likewise (types with kMin)
};
using Packed = PackedBlock<1>;
using PackedHalves = PackedBlock<2>;
template <class P>
using PackedOf = PackedBlock<P::kSplit16 ? 2 : 1>;

inline __m512i bcast4(const int8_t* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}
inline __m512i row_offsets(size_t stride) {
    return _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                              _mm512_set1_epi32(static_cast<int>(stride)));
}
// 16 rows x 16 bytes at p + r*stride -> y[j] lane r = dword j of row r (j < 4).
__attribute__((always_inline)) inline void load_t16x4(const uint8_t* p, size_t stride, __m512i y[4]) {
    const __m512i perm = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    __m512i z[4];
    for (int g = 0; g < 4; ++g) {
        const uint8_t* q = p + 4 * g * stride;
        __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i*)q));
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i*)(q + stride)), 1);
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i*)(q + 2 * stride)), 2);
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i*)(q + 3 * stride)), 3);
        z[g] = _mm512_permutexvar_epi32(perm, v);  // 128-bit lane j: rows 4g..4g+3, dword j
    }
    const __m512i t0 = _mm512_shuffle_i32x4(z[0], z[1], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512i t1 = _mm512_shuffle_i32x4(z[0], z[1], _MM_SHUFFLE(3, 2, 3, 2));
    const __m512i t2 = _mm512_shuffle_i32x4(z[2], z[3], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512i t3 = _mm512_shuffle_i32x4(z[2], z[3], _MM_SHUFFLE(3, 2, 3, 2));
    y[0] = _mm512_shuffle_i32x4(t0, t2, _MM_SHUFFLE(2, 0, 2, 0));
    y[1] = _mm512_shuffle_i32x4(t0, t2, _MM_SHUFFLE(3, 1, 3, 1));
    y[2] = _mm512_shuffle_i32x4(t1, t3, _MM_SHUFFLE(2, 0, 2, 0));
    y[3] = _mm512_shuffle_i32x4(t1, t3, _MM_SHUFFLE(3, 1, 3, 1));
}
// 16 rows x 32 bytes at p + r*stride -> y[j] lane r = dword j of row r (j < 8).
__attribute__((always_inline)) inline void load_t16x8(const uint8_t* p, size_t stride, __m512i y[8]) {
    const __m512i perm = _mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
    __m512i q[8];
    for (int g = 0; g < 8; ++g) {
        const uint8_t* r = p + 2 * g * stride;
        const __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i*)r)),
                                             _mm256_loadu_si256((const __m256i*)(r + stride)), 1);
        q[g] = _mm512_permutexvar_epi32(perm, v);  // qword k: rows 2g, 2g+1 at dword k
    }
    // 8x8 transpose of qwords: y[k] = qword k of q[0..7].
    __m512i a[8];
    for (int g = 0; g < 4; ++g) {
        a[2 * g] = _mm512_unpacklo_epi64(q[2 * g], q[2 * g + 1]);      // lane l: q2g[2l], q2g+1[2l]
        a[2 * g + 1] = _mm512_unpackhi_epi64(q[2 * g], q[2 * g + 1]);  // lane l: ...[2l+1]
    }
    for (int h = 0; h < 2; ++h) {  // h = 0: even k from a0 a2 a4 a6; h = 1: odd k from a1 a3 a5 a7
        const __m512i t0 = _mm512_shuffle_i64x2(a[h], a[2 + h], _MM_SHUFFLE(1, 0, 1, 0));
        const __m512i t1 = _mm512_shuffle_i64x2(a[h], a[2 + h], _MM_SHUFFLE(3, 2, 3, 2));
        const __m512i t2 = _mm512_shuffle_i64x2(a[4 + h], a[6 + h], _MM_SHUFFLE(1, 0, 1, 0));
        const __m512i t3 = _mm512_shuffle_i64x2(a[4 + h], a[6 + h], _MM_SHUFFLE(3, 2, 3, 2));
        y[0 + h] = _mm512_shuffle_i64x2(t0, t2, _MM_SHUFFLE(2, 0, 2, 0));
        y[2 + h] = _mm512_shuffle_i64x2(t0, t2, _MM_SHUFFLE(3, 1, 3, 1));
        y[4 + h] = _mm512_shuffle_i64x2(t1, t3, _MM_SHUFFLE(2, 0, 2, 0));
        y[6 + h] = _mm512_shuffle_i64x2(t1, t3, _MM_SHUFFLE(3, 1, 3, 1));
    }
}
// ---------------------------------------------------------------- where the 16 rows come from
// A packer reads one call's blocks of 16 rows through a source, as loads named by their byte
// offset inside one row's block. GgufRows reads the GGUF rows there (a transpose or a gather per
// load). tile_weights (quant.h) stores what those loads return, in the order the packer makes
// them, over the tile's own bytes (RecordingRows); TiledRows then reads them back with
// linear loads, so decode streams the weights without transposes or gathers, and gives the
// same packed values, hence the same results.
struct GgufRows {
    const uint8_t* p;  // row 0 of the call's block
    size_t stride;
    __m512i idx;  // row_offsets(stride)
    void t16x4(size_t off, __m512i y[4]) { load_t16x4(p + off, stride, y); }
    void t16x8(size_t off, __m512i y[8]) { load_t16x8(p + off, stride, y); }
    __m512i dwords(size_t off) { return _mm512_i32gather_epi32(idx, p + off, 1); }  // lane r: row r's dword
    // lane r: row r's f16 at off, gathered as the 4 bytes ending there (from the start for off
    // 0), so a field at the end of a block (Q6_K's d, Q3_K's) is not read past the last row
    __m256i halves(size_t off) {
        return _mm512_cvtepi32_epi16(off >= 2 ? _mm512_srli_epi32(dwords(off - 2), 16) : dwords(off));
    }
    // lane r: row r's byte at off (gathered as the dword starting there: off + 4 <= block size)
    __m128i bytes(size_t off) { return _mm512_cvtepi32_epi8(dwords(off)); }
};
struct TiledRows {
    const uint8_t* p;  // the next stored load
    void t16x4(size_t, __m512i y[4]) { vectors(y, 4); }
    void t16x8(size_t, __m512i y[8]) { vectors(y, 8); }
    __m512i dwords(size_t) {
        __m512i v;
        vectors(&v, 1);
        return v;
    }
    __m256i halves(size_t) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
        p += 32;
        return v;
    }
    __m128i bytes(size_t) {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
        p += 16;
        return v;
    }
    void vectors(__m512i* y, int n) {
        for (int j = 0; j < n; ++j) y[j] = _mm512_loadu_si512(p + 64 * j);
        p += 64 * n;
    }
};
struct RecordingRows {
    GgufRows in;
    uint8_t* out;  // where the next load's result goes
    void t16x4(size_t off, __m512i y[4]) { in.t16x4(off, y), store(y, 4); }
    void t16x8(size_t off, __m512i y[8]) { in.t16x8(off, y), store(y, 8); }
    __m512i dwords(size_t off) {
        __m512i v = in.dwords(off);
        store(&v, 1);
        return v;
    }
    __m256i halves(size_t off) {
        const __m256i v = in.halves(off);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), v);
        out += 32;
        return v;
    }
    __m128i bytes(size_t off) {
        const __m128i v = in.bytes(off);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out), v);
        out += 16;
        return v;
    }
    void store(const __m512i* y, int n) {
        for (int j = 0; j < n; ++j) _mm512_storeu_si512(out + 64 * j, y[j]);
        out += 64 * n;
    }
};
inline __m512 f16_lo(__m512i dw) { return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dw)); }
inline __m512 f16_hi(__m512i dw) { return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dw, 16))); }

// The f16 scale d at the start of a block (and the f16 minimum m after it, with kHasMin).
template <bool kHasMin, class Src>
inline void scale_and_min(Src& src, Packed* out) {
    if constexpr (kHasMin) {
        const __m512i dm = src.dwords(0);
        out->scale[0] = f16_lo(dm);
        out->min[0] = f16_hi(dm);
    } else {
        out->scale[0] = _mm512_cvtph_ps(src.halves(0));
    }
}
inline __m512i lo_nib(__m512i v) { return _mm512_and_si512(v, _mm512_set1_epi8(0x0F)); }
inline __m512i hi_nib(__m512i v) { return _mm512_and_si512(_mm512_srli_epi16(v, 4), _mm512_set1_epi8(0x0F)); }
// Signed int8 q -> unsigned q + 128 (flip the sign bit), for the packers with kOff = 128.
inline __m512i offset_128(__m512i v) { return _mm512_xor_si512(v, _mm512_set1_epi8(char(0x80))); }
// Codebook indices (bytes 0..15) -> kValues[q] + 128, unsigned, for the packers of the codebook
// types (kIq4Values: IQ4_NL, IQ4_XS; kMxfp4Values: MXFP4), whose kOff is 128.
template <const int8_t* kValues>
inline __m512i codebook(__m512i q) {
    alignas(16) static constexpr auto kTable = [] {
        std::array<uint8_t, 16> t{};
        for (int i = 0; i < 16; ++i) t[i] = static_cast<uint8_t>(kValues[i] + 128);
        return t;
    }();
    return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(kTable.data()))), q);
}

// ---------------------------------------------------------------- packers
// Each packer makes kPerCall consecutive packed blocks (of kBlock values) of 16 rows per call,
// handing each to sink(j, block) as soon as it is made, so that decode can use it while it is
// still in registers (prefill stores them: pack_tiles).
//   kOff: the weight is q - kOff (I = I_unsigned - kOff * activation sum, exact)
//   kMin: a float minimum per block (term min * dcs; per half with kSplit16)
//   kSplit16: each half of 16 values has its own scale (and minimum): PackedHalves
#define STRATA_PACK_INLINE __attribute__((always_inline)) inline

// MXFP4's scales 2^(e - 128) from the 16 rows' exponent bytes (subnormal for e < 2, as
// e8m0_to_fp32_half).
inline __m512 e8m0_half(__m128i bytes) {
    const __m512i e = _mm512_cvtepu8_epi32(bytes);
    const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
    const __m512i subnormal = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
    return _mm512_castsi512_ps(_mm512_mask_blend_epi32(_mm512_cmplt_epu32_mask(e, _mm512_set1_epi32(2)), normal, subnormal));
}

// Q4_0 (d, qs), Q4_1 (d, m, qs) and the codebook types (kValues): IQ4_NL (d, qs of indices) and
// MXFP4 (its exponent e, qs). MXFP4's 16 exponents come as one 16-byte load, so a tiled call
// stores 4 x 64 + 16 bytes: exactly the tile's 16 blocks of 17.
template <class Block, int kOffset, bool kHasMin, const int8_t* kValues = nullptr>
struct PackQ4 {
    static_assert(!kValues || kOffset == 128);
    static constexpr int kBlock = 32, kPerCall = 1, kOff = kOffset, kBlockBytes = sizeof(Block);
    static constexpr bool kMin = kHasMin, kSplit16 = false;
    template <class Src, class Sink>
    STRATA_PACK_INLINE static void pack(Src& src, Sink&& sink) {
        Packed pk;
        __m512i y[4];
        src.t16x4(offsetof(Block, qs), y);
        auto value = [](__m512i q) {
            if constexpr (kValues != nullptr) return codebook<kValues>(q);
            else return q;
        };
        for (int j = 0; j < 4; ++j) {
            pk.w[j] = value(lo_nib(y[j]));       // values 4j..4j+3
            pk.w[4 + j] = value(hi_nib(y[j]));   // values 16+4j..
        }
        if constexpr (std::is_same_v<Block, BlockMXFP4>) pk.scale[0] = e8m0_half(src.bytes(offsetof(BlockMXFP4, e)));
        else scale_and_min<kHasMin>(src, &pk);
        sink(0, pk);
    }
};

struct PackQ8_0 {
    static constexpr int kBlock = 32, kPerCall = 1, kOff = 128, kBlockBytes = sizeof(BlockQ8_0);
    static constexpr bool kMin = false, kSplit16 = false;
    template <class Src, class Sink>
    STRATA_PACK_INLINE static void pack(Src& src, Sink&& sink) {
        Packed pk;
        __m512i y[8];
        src.t16x8(offsetof(BlockQ8_0, qs), y);
        for (int j = 0; j < 8; ++j) pk.w[j] = offset_128(y[j]);  // the kernel takes 128 * s back off
        pk.scale[0] = _mm512_cvtph_ps(src.halves(0));
        sink(0, pk);
    }
};

// Q4_K / Q5_K: one call packs a super-block = 8 blocks of 32 (sub-blocks 2c and 2c+1 share the
// 32 bytes qs[32c..]: low nibbles, then high nibbles).
template <bool kFive>
struct PackQ45K {
    using Block = std::conditional_t<kFive, BlockQ5_K, BlockQ4_K>;
    static constexpr int kBlock = 32, kPerCall = 8, kOff = 0, kBlockBytes = sizeof(Block);
    static constexpr bool kMin = true, kSplit16 = false;
    template <class Src, class Sink>
    STRATA_PACK_INLINE static void pack(Src& src, Sink&& sink) {
        // d, dmin and the 12 scale bytes of the 16 rows: y[0] = d | dmin << 16, y[1..3] = u0..u2.
        __m512i h[4];
        src.t16x4(0, h);
        const __m512 d = f16_lo(h[0]);
        const __m512 dmin = f16_hi(h[0]);
        // ggml's unpacking of the 6-bit scales and mins, on 16 rows at once.
        const __m512i m1 = _mm512_set1_epi32(0x3f3f3f3f), m2 = _mm512_set1_epi32(0x0f0f0f0f),
                      m3 = _mm512_set1_epi32(0x03030303);
        const __m512i u0 = h[1], u1 = h[2], u2 = h[3];
        const __m512i sc_lo = _mm512_and_si512(u0, m1);  // scales 0..3
        const __m512i sc_hi = _mm512_or_si512(_mm512_and_si512(u2, m2),
                                              _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u0, 6), m3), 4));
        const __m512i mn_lo = _mm512_and_si512(u1, m1);  // mins 0..3
        const __m512i mn_hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(u2, 4), m2),
                                              _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u1, 6), m3), 4));
        __m512i qh[8];
        if constexpr (kFive) src.t16x8(offsetof(Block, qh), qh);
        for (int c = 0; c < 4; ++c) {
            __m512i y[8];
            src.t16x8(offsetof(Block, qs) + 32 * c, y);
            for (int half = 0; half < 2; ++half) {
                const int j = 2 * c + half;
                Packed pk;
                for (int k = 0; k < 8; ++k) {
                    __m512i v = half ? hi_nib(y[k]) : lo_nib(y[k]);
                    if constexpr (kFive)  // bit j of qh[l] is the fifth bit of value l of sub-block j
                        v = _mm512_mask_add_epi8(v, _mm512_test_epi8_mask(qh[k], _mm512_set1_epi8(char(1 << j))), v,
                                                 _mm512_set1_epi8(16));
                    pk.w[k] = v;
                }
                const int sh = 8 * (j % 4);
                const __m512i sc = _mm512_and_si512(_mm512_srli_epi32(j < 4 ? sc_lo : sc_hi, sh), _mm512_set1_epi32(0xFF));
                const __m512i mn = _mm512_and_si512(_mm512_srli_epi32(j < 4 ? mn_lo : mn_hi, sh), _mm512_set1_epi32(0xFF));
                pk.scale[0] = _mm512_mul_ps(d, _mm512_cvtepi32_ps(sc));
                // -(dmin * m), as the reference
                pk.min[0] = _mm512_sub_ps(_mm512_setzero_ps(), _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(mn)));
                sink(j, pk);
            }
        }
    }
};

// Q5_0 / Q5_1: as Q4 plus the fifth bit, bit j of the block's 32-bit qh for value j.
template <class Block, int kOffset, bool kHasMin>
struct PackQ5 {
    static constexpr int kBlock = 32, kPerCall = 1, kOff = kOffset, kBlockBytes = sizeof(Block);
    static constexpr bool kMin = kHasMin, kSplit16 = false;
    template <class Src, class Sink>
    STRATA_PACK_INLINE static void pack(Src& src, Sink&& sink) {
        Packed pk;
        __m512i y[4];
        src.t16x4(offsetof(Block, qs), y);
        const __m512i qh = src.dwords(offsetof(Block, qh));
        // 4 bits of qh -> bit 4 of 4 bytes: (t * 0x00204081) & 0x01010101 spreads bit i to byte i.
        auto fifth = [&](int first) {
            const __m512i t = _mm512_and_si512(_mm512_srli_epi32(qh, first), _mm512_set1_epi32(0xF));
            const __m512i spread = _mm512_and_si512(_mm512_mullo_epi32(t, _mm512_set1_epi32(0x00204081)),
                                                    _mm512_set1_epi32(0x01010101));
            return _mm512_slli_epi32(spread, 4);
        };
        for (int j = 0; j < 4; ++j) {
            pk.w[j] = _mm512_or_si512(lo_nib(y[j]), fifth(4 * j));
            pk.w[4 + j] = _mm512_or_si512(hi_nib(y[j]), fifth(16 + 4 * j));
        }
        scale_and_min<kHasMin>(src, &pk);
        sink(0, pk);
    }
};

// Q8_K (as weights): a float scale per 256, int8 values; blocks of 32 as Q8_0.
struct PackQ8K {
    static constexpr int kBlock = 32, kPerCall = 8, kOff = 128, kBlockBytes = sizeof(BlockQ8_K);
    static constexpr bool kMin = false, kSplit16 = false;
    template <class Src, class Sink>
    STRATA_PACK_INLINE static void pack(Src& src, Sink&& sink) {
        const __m512 d = _mm512_castsi512_ps(src.dwords(offsetof(BlockQ8_K, d)));
        for (int j = 0; j < 8; ++j) {
            Packed pk;
            __m512i y[8];
            src.t16x8(offsetof(BlockQ8_K, qs) + 32 * j, y);
            for (int k = 0; k < 8; ++k) pk.w[k] = offset_128(y[k]);
            pk.scale[0] = d;
            sink(j, pk);
        }
    }
};

// Q6_K: 6-bit q (value q - 32) in groups of 16 with int8 scales, so each packed block of 32 has
// two scales (kSplit16): scale[0] for values 0-15, scale[1] for values 16-31; the kernel keeps
// the two halves' integer dots apart. Block j (h = j/4, s = j%4) takes the low (s < 2) or
// high nibbles of ql[64h + 32(s&1) ..] and bits 2s, 2s+1 of qh[32h ..].
struct PackQ6K {
    static constexpr int kBlock = 32, kPerCall = 8, kOff = 32, kBlockBytes = sizeof(BlockQ6_K);
    static constexpr bool kMin = false, kSplit16 = true;
    template <class Src, class Sink>
    STRATA_PACK_INLINE static void pack(Src& src, Sink&& sink) {
        const __m512 d = _mm512_cvtph_ps(src.halves(offsetof(BlockQ6_K, d)));
        __m512i sc[4];  // sc[i] lane r: row r's scales 4i..4i+3 (int8)
        src.t16x4(offsetof(BlockQ6_K, scales), sc);
        auto scale = [&](int g) {  // d * scale g, as the reference's d * float(sc)
            const __m512i v = _mm512_srai_epi32(_mm512_slli_epi32(sc[g / 4], 24 - 8 * (g % 4)), 24);
            return _mm512_mul_ps(d, _mm512_cvtepi32_ps(v));
        };
        for (int h = 0; h < 2; ++h) {
            __m512i ql[2][8], qh[8];
            src.t16x8(offsetof(BlockQ6_K, ql) + 64 * h, ql[0]);
            src.t16x8(offsetof(BlockQ6_K, ql) + 64 * h + 32, ql[1]);
            src.t16x8(offsetof(BlockQ6_K, qh) + 32 * h, qh);
            for (int s = 0; s < 4; ++s) {
                PackedHalves pk;
                for (int k = 0; k < 8; ++k) {
                    const __m512i lo = (s >> 1) ? hi_nib(ql[s & 1][k]) : lo_nib(ql[s & 1][k]);
                    const __m512i hi2 = _mm512_and_si512(_mm512_srli_epi16(qh[k], 2 * s), _mm512_set1_epi8(3));
                    pk.w[k] = _mm512_or_si512(lo, _mm512_slli_epi16(hi2, 4));  // hi2 < 4: no carry across bytes
                }
                pk.scale[0] = scale(2 * (4 * h + s));
                pk.scale[1] = scale(2 * (4 * h + s) + 1);
                sink(4 * h + s, pk);
            }
        }
    }
};

// A packer with the kernels' lo switch: kLo = false when the activations are ActFormat::Q8 (lo
// all zero), so the kernels skip the lo dot products.
template <class P, bool kWithLo>
struct WithLo : P {
    static constexpr bool kLo = kWithLo;
};

// ---------------------------------------------------------------- packing a chunk of rows
// The 16-row tile at row r (a multiple of 16) of rows [r, r1): read in place when full (tiled
// or GGUF rows), else from a zero-padded copy of its GGUF rows (never past the weights; a
// partial last tile is never tiled).
struct RowTile {
    const uint8_t* p;
    int n_valid;
    bool tiled;
};
inline RowTile tile_rows(const MatmulJob& job, int64_t r, int64_t r1) {
    const size_t stride = job.w_stride;
    const int n_valid = static_cast<int>(std::min<int64_t>(kRowTile, r1 - r));
    if (n_valid == kRowTile) return {job.w + r * stride, n_valid, job.w_tiled};
    uint8_t* tmp = thread_scratch(1, kRowTile * stride);
    std::memcpy(tmp, job.w + r * stride, n_valid * stride);
    std::memset(tmp + n_valid * stride, 0, (kRowTile - n_valid) * stride);
    return {tmp, n_valid, false};
}
// Packs call c (blocks c * kPerCall ...) of a tile, handing block j of it to sink(j, block).
template <class P, class Sink>
__attribute__((always_inline)) inline void pack_call(const RowTile& t, size_t stride, __m512i idx, int64_t c,
                                                     Sink&& sink) {
    if (t.tiled) {
        TiledRows src{t.p + c * kRowTile * P::kBlockBytes};
        P::pack(src, sink);
    } else {
        GgufRows src{t.p + c * P::kBlockBytes, stride, idx};
        P::pack(src, sink);
    }
}
// Packs the 16-row tiles starting at rc (up to n_tiles of them, ending at r1) into pk: tile i
// occupies pk[i * nb .. (i + 1) * nb). Returns the number of tiles; n_valid[i] its valid rows.
template <class P>
int64_t pack_tiles(const MatmulJob& job, int64_t rc, int64_t r1, int64_t n_tiles, PackedOf<P>* pk, int* n_valid) {
    const int64_t nb = job.n_cols / P::kBlock;
    const __m512i idx = row_offsets(job.w_stride);
    n_tiles = std::min<int64_t>(n_tiles, (r1 - rc + kRowTile - 1) / kRowTile);
    // In the file layout a tile's 16 rows are read strided, which the hardware prefetcher does not
    // follow: the next tile (16 rows, contiguous) goes to L2 in step with this one's calls, as
    // decode does (a streamed layer arrives in DRAM, not in any cache).
    constexpr size_t kCallBytes = kRowTile * P::kBlockBytes;
    for (int64_t i = 0; i < n_tiles; ++i) {
        const int64_t r = rc + i * kRowTile;
        const RowTile t = tile_rows(job, r, r1);
        n_valid[i] = t.n_valid;
        const uint8_t* next = !t.tiled && r + 2 * kRowTile <= job.n_rows ? job.w + (r + kRowTile) * job.w_stride : nullptr;
        PackedOf<P>* dst = pk + i * nb;
        for (int64_t c = 0; c < nb / P::kPerCall; ++c) {
            if (next)
                for (size_t l = 0; l < kCallBytes; l += 64)
                    _mm_prefetch(reinterpret_cast<const char*>(next + size_t(c) * kCallBytes + l), _MM_HINT_T1);
            pack_call<P>(t, job.w_stride, idx, c, [&](int j, const PackedOf<P>& pk) { dst[c * P::kPerCall + j] = pk; });
        }
    }
    return n_tiles;
}

}  // namespace strata::cpu::pack
