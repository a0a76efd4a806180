#pragma once
// Packers (pack_avx512.h) for the 2- and 3-bit K-quants and IQ4_XS: the same packed blocks of
// 32 values of 16 rows, so decode, prefill and tile_weights take them as they take Q4_K's.
// Each loads exactly its block's bytes (tile_weights stores the loads over the tile in place).
// Include only from files built with the AVX-512 flags.
#include "cpu/pack_avx512.h"

namespace strata::cpu::pack {

// Byte g % 4 of each lane of v[g / 4]: lane r's byte g of 16, as int32.
inline __m512i byte_of(const __m512i v[4], int g) {
    return _mm512_and_si512(_mm512_srli_epi32(v[g / 4], 8 * (g % 4)), _mm512_set1_epi32(0xFF));
}
// Bit pair `pair` (0..3) of each byte: one 2-bit value per byte.
inline __m512i bit_pair(__m512i v, int pair) {
    return _mm512_and_si512(_mm512_srli_epi16(v, 2 * pair), _mm512_set1_epi8(3));
}

// Q2_K: block j = 4n + p (n = half of qs, p = bit pair) takes bit pair p of qs[32n ..]; its two
// halves have the scale d * sc and minimum -(dmin * m) of groups 2j and 2j + 1.
struct PackQ2K {
    static constexpr int kBlock = 32, kPerCall = 8, kOff = 0, kBlockBytes = sizeof(BlockQ2_K);
    static constexpr bool kMin = true, kSplit16 = true;
    template <class Src, class Sink>
    STRATA_PACK_INLINE static void pack(Src& src, Sink&& sink) {
        __m512i sc[4];  // lane r: row r's 16 bytes sc | m << 4
        src.t16x4(offsetof(BlockQ2_K, scales), sc);
        const __m512i dm = src.dwords(offsetof(BlockQ2_K, d));  // d | dmin << 16
        const __m512 d = f16_lo(dm), dmin = f16_hi(dm);
        for (int n = 0; n < 2; ++n) {
            __m512i q[8];
            src.t16x8(offsetof(BlockQ2_K, qs) + 32 * n, q);
            for (int p = 0; p < 4; ++p) {
                const int j = 4 * n + p;
                PackedHalves pk;
                for (int k = 0; k < 8; ++k) pk.w[k] = bit_pair(q[k], p);
                for (int h = 0; h < 2; ++h) {
                    const __m512i b = byte_of(sc, 2 * j + h);
                    pk.scale[h] = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_and_si512(b, _mm512_set1_epi32(0xF))));
                    // -(dmin * m), as the reference
                    pk.min[h] = _mm512_sub_ps(_mm512_setzero_ps(), _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(_mm512_srli_epi32(b, 4))));
                }
                sink(j, pk);
            }
        }
    }
};

// Q3_K: as Q2_K, plus bit j of hmask[l] as the third bit (value 4 + q - 4, so kOff = 4); its
// halves have the scales d * (sc - 32) of groups 2j and 2j + 1, 6 bits unpacked as ggml does.
struct PackQ3K {
    static constexpr int kBlock = 32, kPerCall = 8, kOff = 4, kBlockBytes = sizeof(BlockQ3_K);
    static constexpr bool kMin = false, kSplit16 = true;
    template <class Src, class Sink>
    STRATA_PACK_INLINE static void pack(Src& src, Sink&& sink) {
        // The 12 scale bytes as three dwords: a 16-byte load would run past the block.
        constexpr size_t kScales = offsetof(BlockQ3_K, scales);
        const __m512i a0 = src.dwords(kScales), a1 = src.dwords(kScales + 4), a2 = src.dwords(kScales + 8);
        const __m512 d = _mm512_cvtph_ps(src.halves(offsetof(BlockQ3_K, d)));
        const __m512i m4 = _mm512_set1_epi32(0x0f0f0f0f), m2 = _mm512_set1_epi32(0x03030303);
        auto with_high = [&](__m512i low4, int shift) {  // low nibbles | bits `shift`.. of a2, as bits 4-5
            return _mm512_or_si512(_mm512_and_si512(low4, m4),
                                   _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(a2, shift), m2), 4));
        };
        const __m512i sc[4] = {with_high(a0, 0), with_high(a1, 2), with_high(_mm512_srli_epi32(a0, 4), 4),
                               with_high(_mm512_srli_epi32(a1, 4), 6)};  // sc[i]: groups 4i..4i+3
        auto scale = [&](int g) {
            return _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_sub_epi32(byte_of(sc, g), _mm512_set1_epi32(32))));
        };
        __m512i hm[8];
        src.t16x8(offsetof(BlockQ3_K, hmask), hm);
        for (int n = 0; n < 2; ++n) {
            __m512i q[8];
            src.t16x8(offsetof(BlockQ3_K, qs) + 32 * n, q);
            for (int p = 0; p < 4; ++p) {
                const int j = 4 * n + p;
                PackedHalves pk;
                for (int k = 0; k < 8; ++k) {
                    const __m512i third = _mm512_and_si512(_mm512_srli_epi16(hm[k], j), _mm512_set1_epi8(1));
                    pk.w[k] = _mm512_or_si512(bit_pair(q[k], p), _mm512_slli_epi16(third, 2));  // no carry across bytes
                }
                pk.scale[0] = scale(2 * j);
                pk.scale[1] = scale(2 * j + 1);
                sink(j, pk);
            }
        }
    }
};

// IQ4_XS: 8 blocks of 32 codebook indices (16 bytes each, low nibbles then high), block ib with
// the scale d * (ls - 32): ls = nibble ib of scales_l | bits 2ib, 2ib+1 of scales_h << 4.
struct PackIQ4XS {
    static constexpr int kBlock = 32, kPerCall = 8, kOff = 128, kBlockBytes = sizeof(BlockIQ4_XS);
    static constexpr bool kMin = false, kSplit16 = false;
    template <class Src, class Sink>
    STRATA_PACK_INLINE static void pack(Src& src, Sink&& sink) {
        const __m512i dh = src.dwords(offsetof(BlockIQ4_XS, d));  // d | scales_h << 16
        const __m512i sl = src.dwords(offsetof(BlockIQ4_XS, scales_l));
        const __m512 d = f16_lo(dh);
        for (int c = 0; c < 4; ++c) {
            __m512i y[8];  // y[0..3]: block 2c's 16 bytes, y[4..7]: block 2c + 1's
            src.t16x8(offsetof(BlockIQ4_XS, qs) + 32 * c, y);
            for (int half = 0; half < 2; ++half) {
                const int ib = 2 * c + half;
                Packed pk;
                for (int k = 0; k < 4; ++k) {
                    pk.w[k] = codebook<kIq4Values>(lo_nib(y[4 * half + k]));
                    pk.w[4 + k] = codebook<kIq4Values>(hi_nib(y[4 * half + k]));
                }
                const __m512i lo = _mm512_and_si512(_mm512_srli_epi32(sl, 4 * ib), _mm512_set1_epi32(0xF));
                const __m512i hi = _mm512_and_si512(_mm512_srli_epi32(dh, 16 + 2 * ib), _mm512_set1_epi32(3));
                const __m512i ls = _mm512_or_si512(lo, _mm512_slli_epi32(hi, 4));
                pk.scale[0] = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_sub_epi32(ls, _mm512_set1_epi32(32))));
                sink(ib, pk);
            }
        }
    }
};

}  // namespace strata::cpu::pack
