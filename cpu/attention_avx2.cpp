// The plain attention tile on the AVX2 path: the reference's loop (attention_tile_loop.h) with a
// query row's dot against a key row in 8-lane FMA accumulators and the weighted sum of value
// rows 8 values at a time. Built with AVX2 and FMA flags (cpu/CMakeLists.txt).
#include <immintrin.h>

#include "cpu/attention_tile_loop.h"

namespace strata::cpu {

namespace {
struct Avx2Ops {
    static float dot(const float* q, const float* k, int32_t n) {
        __m256 acc = _mm256_setzero_ps();
        int32_t d = 0;
        for (; d + 8 <= n; d += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), _mm256_loadu_ps(k + d), acc);
        __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
        s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        s = _mm_add_ss(s, _mm_movehdup_ps(s));
        float dot = _mm_cvtss_f32(s);
        for (; d < n; ++d) dot += q[d] * k[d];
        return dot;
    }
    static void axpy(float w, const float* v, float* o, int32_t n) {
        const __m256 wv = _mm256_set1_ps(w);
        int32_t d = 0;
        for (; d + 8 <= n; d += 8) _mm256_storeu_ps(o + d, _mm256_fmadd_ps(wv, _mm256_loadu_ps(v + d), _mm256_loadu_ps(o + d)));
        for (; d < n; ++d) o[d] += w * v[d];
    }
};
}  // namespace

void attention_tile_avx2(const AttentionTile& t) { detail::attention_tile_loop<Avx2Ops>(t); }

}  // namespace strata::cpu
