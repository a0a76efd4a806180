// untile_weights' gathers: sixteen byte pairs, or sixteen bytes, to an instruction.
#include <immintrin.h>

#include <cstring>

#include "cpu/gemm_x86.h"

namespace strata::cpu {

void avx512_gather_pairs(const uint8_t* src, const uint32_t* pair_at, size_t n_pairs, uint8_t* dst) {
    size_t i = 0;
    for (; i + 16 <= n_pairs; i += 16) {
        const __m512i at = _mm512_loadu_si512(pair_at + i);
        const __m512i dwords = _mm512_i32gather_epi32(at, src, 1);  // each pair and the two bytes after it
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 2 * i), _mm512_cvtepi32_epi16(dwords));
    }
    for (; i < n_pairs; ++i) std::memcpy(dst + 2 * i, src + pair_at[i], 2);
}

void avx512_gather_bytes(const uint8_t* src, const uint32_t* byte_at, size_t n_bytes, uint8_t* dst) {
    size_t i = 0;
    for (; i + 16 <= n_bytes; i += 16) {
        const __m512i at = _mm512_loadu_si512(byte_at + i);
        const __m512i dwords = _mm512_i32gather_epi32(at, src, 1);  // each byte and the three after it
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm512_cvtepi32_epi8(dwords));
    }
    for (; i < n_bytes; ++i) dst[i] = src[byte_at[i]];
}

}  // namespace strata::cpu
