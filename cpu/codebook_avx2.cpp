// AVX2 kernels of the 4-bit codebook types (IQ4_NL, MXFP4, IQ4_XS): each index looked up by a
// byte shuffle, the values dotted with activations widened as dot_avx2.h lays them out. Built
// with quant_avx2.cpp's flags.
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
        ActQ8x2 v[NT];
        const int16_t* c[NT];
        act_views<NT>(x, n, v, c);
        const __m256i table = codebook(kValues);
        __m256 acc[NT];
        for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
        for (int64_t i = 0; i < n / kQK; ++i) {
            prefetch_ahead<kPrefetchBytes>(b + i);  // 17- and 18-byte blocks: every line gets one
            const Halves w = split_s8(codebook_values(table, b[i].qs));
            const float d = codebook_scale(b[i]);
            for (int t = 0; t < NT; ++t)
                acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(idot(w, c[t] + kQK * i)), _mm256_set1_ps(d * v[t].dc[i]), acc[t]);
        }
        for (int t = 0; t < NT; ++t) out[t] = hsum8(acc[t]);
    }
};

// IQ4_XS: IQ4_NL's codebook in super-blocks of 256, a 6-bit scale each block of 32.
struct DotIQ4XS {
    static constexpr bool kWide = true;
    template <int NT>
    static void run(const void* wv, const Tokens& x, int64_t n, float* out) {
        const auto* b = static_cast<const BlockIQ4_XS*>(wv);
        ActQ8x2 v[NT];
        const int16_t* c[NT];
        act_views<NT>(x, n, v, c);
        const __m256i table = codebook(kIq4Values);
        __m256 acc[NT];
        for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
        for (int64_t i = 0; i < n / kQKK; ++i) {
            const float d = h2f(b[i].d);
            for (int ib = 0; ib < 8; ++ib) {
                if (ib % 2 == 0) prefetch_ahead<kPrefetchBytes>(b + i, 32 * ib);  // 4 lines cover the 136 bytes
                const Halves w = split_s8(codebook_values(table, b[i].qs + 16 * ib));
                const float dl = d * float(iq4_xs_scale(b[i], ib));
                const int64_t ab = 8 * i + ib;
                for (int t = 0; t < NT; ++t)
                    acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(idot(w, c[t] + kQK * ab)), _mm256_set1_ps(dl * v[t].dc[ab]), acc[t]);
            }
        }
        for (int t = 0; t < NT; ++t) out[t] = hsum8(acc[t]);
    }
};

}  // namespace

QuantKernels avx2_codebook_kernels(DType type) {
    switch (type) {
        case DType::IQ4_NL: return {nullptr, rows_job<DotCodebook<BlockIQ4_NL, kIq4Values>>};
        case DType::MXFP4: return {nullptr, rows_job<DotCodebook<BlockMXFP4, kMxfp4Values>>};
        case DType::IQ4_XS: return {nullptr, rows_job<DotIQ4XS>};
        default: return {};
    }
}

}  // namespace strata::cpu
