// AVX2 kernels of the low-bit types (quant_ref_low_bit.h's): Q2_K and Q3_K, their values
// gathered from bit pairs (and Q3_K's third bit) 32 at a time, and the 4-bit codebook types
// (IQ4_NL, MXFP4, IQ4_XS), each index looked up by a byte shuffle; the values dotted with
// activations widened as dot_avx2.h lays them out. Built with quant_avx2.cpp's flags.
#include <cstring>

#include "cpu/dot_avx2.h"
#include "cpu/quant_ref_low_bit.h"

namespace strata::cpu {
namespace {

// Each 4-bit index of a block of 32 (low nibbles values 0-15, high 16-31) looked up in the
// 16-entry codebook by a byte shuffle: the block's int8 values in value order.
inline __m256i codebook_values(__m256i table, const uint8_t* qs) { return _mm256_shuffle_epi8(table, nibbles(qs)); }
inline __m256i codebook(const int8_t* values) { return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i*)values)); }
inline float codebook_scale(const BlockIQ4_NL& b) { return h2f(b.d); }
inline float codebook_scale(const BlockMXFP4& b) { return e8m0_to_fp32_half(b.e); }

// IQ4_NL and MXFP4: one scale a block of 32.
template <class Block, const int8_t* kValues>
struct DotCodebook {
    static constexpr bool kWide = true;
    template <int NT>
    static void run(const void* wv, const Tokens& x, int64_t n, float* out) {
        const auto* b = static_cast<const Block*>(wv);
        RowDots<NT> r(x, n);
        const __m256i table = codebook(kValues);
        for (int64_t i = 0; i < n / kQK; ++i) {
            prefetch_ahead<kPrefetchBytes>(b + i);  // 17- and 18-byte blocks: every line gets one
            const Halves w = split_s8(codebook_values(table, b[i].qs));
            const float d = codebook_scale(b[i]);
            for (int t = 0; t < NT; ++t)
                r.add(t, r.dot(t, w, i), _mm256_set1_ps(d * r.v[t].dc[i]));
        }
        for (int t = 0; t < NT; ++t) out[t] = r.sum(t);
    }
};

// IQ4_XS: IQ4_NL's codebook in super-blocks of 256, a 6-bit scale each block of 32.
struct DotIQ4XS {
    static constexpr bool kWide = true;
    template <int NT>
    static void run(const void* wv, const Tokens& x, int64_t n, float* out) {
        const auto* b = static_cast<const BlockIQ4_XS*>(wv);
        RowDots<NT> r(x, n);
        const __m256i table = codebook(kIq4Values);
        for (int64_t i = 0; i < n / kQKK; ++i) {
            const float d = h2f(b[i].d);
            for (int ib = 0; ib < 8; ++ib) {
                if (ib % 2 == 0) prefetch_ahead<kPrefetchBytes>(b + i, 32 * ib);  // 4 lines cover the 136 bytes
                const Halves w = split_s8(codebook_values(table, b[i].qs + 16 * ib));
                const float dl = d * float(iq4_xs_scale(b[i], ib));
                const int64_t ab = 8 * i + ib;
                for (int t = 0; t < NT; ++t)
                    r.add(t, r.dot(t, w, ab), _mm256_set1_ps(dl * r.v[t].dc[ab]));
            }
        }
        for (int t = 0; t < NT; ++t) out[t] = r.sum(t);
    }
};

// ---------------------------------------------------------------- Q2_K and Q3_K
// Values 32 blk .. 32 blk + 31 of a super-block: bit pair blk % 4 of qs[32 (blk / 4) + l].
inline __m256i bit_pairs(const uint8_t* qs, int blk) {
    return _mm256_and_si256(_mm256_srli_epi16(load256(qs + 32 * (blk / 4)), 2 * (blk % 4)), _mm256_set1_epi8(3));
}

// Q2_K: x = d sc q - dmin m in groups of 16 (sc and m a byte's nibbles); the minimums come off
// through each group's sum of activations.
struct Q2K {
    using Block = BlockQ2_K;
    static constexpr bool kBlockScales = false, kMins = true, kOffset = false;
    static void prefetch(const Block* p) {  // 84 bytes: 2 lines
        prefetch_ahead<kPrefetchBytes>(p);
        prefetch_ahead<kPrefetchBytes>(p, 64);
    }
    static GroupBytes groups(const Block& b) {
        const __m128i v = _mm_loadu_si128((const __m128i*)b.scales), nibble = _mm_set1_epi8(0xF);
        return {_mm_and_si128(v, nibble), _mm_and_si128(_mm_srli_epi16(v, 4), nibble)};
    }
    static Halves values(const Block& b, int blk) { return split_u8(bit_pairs(b.qs, blk)); }
};

// Q3_K: x = d (sc - 32) (q - 4) in groups of 16, q's third bit blk of hmask[l], sc's 6 bits
// q3_scale's: the low 4 from scales[0..7]'s nibbles, the high 2 from scales[8..11]'s bit pairs.
struct Q3K {
    using Block = BlockQ3_K;
    static constexpr bool kBlockScales = false, kMins = false, kOffset = false;
    static void prefetch(const Block* p) {  // 110 bytes: 2 or 3 lines
        prefetch_ahead<kPrefetchBytes>(p);
        prefetch_ahead<kPrefetchBytes>(p, 64);
        prefetch_ahead<kPrefetchBytes>(p, 109);
    }
    static GroupBytes groups(const Block& b) {
        uint64_t low;
        uint32_t high;
        std::memcpy(&low, b.scales, sizeof low);
        std::memcpy(&high, b.scales + 8, sizeof high);
        constexpr uint64_t kNibbles = 0x0F0F0F0F0F0F0F0Full;
        constexpr uint32_t kPairs = 0x03030303u;
        const __m128i lo = _mm_set_epi64x(static_cast<int64_t>((low >> 4) & kNibbles), static_cast<int64_t>(low & kNibbles));
        const __m128i hi = _mm_set_epi32(static_cast<int>((high >> 6) & kPairs), static_cast<int>((high >> 4) & kPairs),
                                         static_cast<int>((high >> 2) & kPairs), static_cast<int>(high & kPairs));
        return {_mm_sub_epi8(_mm_or_si128(lo, _mm_slli_epi16(hi, 4)), _mm_set1_epi8(32)), _mm_setzero_si128()};
    }
    static Halves values(const Block& b, int blk) {
        const __m256i third = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(load256(b.hmask), blk), _mm256_set1_epi8(1)), 2);
        return split_s8(_mm256_sub_epi8(_mm256_or_si256(bit_pairs(b.qs, blk), third), _mm256_set1_epi8(4)));
    }
};

}  // namespace

QuantKernels avx2_low_bit_kernels(DType type) {
    switch (type) {
        case DType::Q2_K: return {nullptr, rows_job<DotKQuant<Q2K>>};
        case DType::Q3_K: return {nullptr, rows_job<DotKQuant<Q3K>>};
        case DType::IQ4_NL: return {nullptr, rows_job<DotCodebook<BlockIQ4_NL, kIq4Values>>};
        case DType::MXFP4: return {nullptr, rows_job<DotCodebook<BlockMXFP4, kMxfp4Values>>};
        case DType::IQ4_XS: return {nullptr, rows_job<DotIQ4XS>};
        default: return {};
    }
}

}  // namespace strata::cpu
