// The plain attention tile on the AVX2 path: the reference's loop (attention_tile_loop.h) with
// scores 8 keys at a time from the key block transposed (a broadcast FMA a dimension for 4 query
// rows at a time), the softmax's exponentials 8 at a time, and the weighted sum of value rows in
// registers over a block of keys, 64 output values at a time. Built with AVX2 and FMA flags
// (cpu/CMakeLists.txt).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/attention_tile_loop.h"
#include "cpu/exp_cephes.h"

namespace strata::cpu {

namespace {
inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

struct Ops256 {
    static __m256 set1(float a) { return _mm256_set1_ps(a); }
    static __m256 mul(__m256 a, __m256 b) { return _mm256_mul_ps(a, b); }
    static __m256 add(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
    static __m256 fmadd(__m256 a, __m256 b, __m256 c) { return _mm256_fmadd_ps(a, b, c); }
    static __m256 fnmadd(__m256 a, __m256 b, __m256 c) { return _mm256_fnmadd_ps(a, b, c); }
    static __m256 round(__m256 a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
};

// e^x on 8 floats for x <= 88: cephes' expf (exp_cephes.h), about 2 ulp; 0 below -87, -inf
// included; a NaN stays one.
inline __m256 exp256(__m256 x) {
    const __m256 tiny = _mm256_cmp_ps(x, _mm256_set1_ps(cephes_exp::kLowest), _CMP_LT_OQ);
    __m256 n;
    const __m256 p = cephes_exp::reduced<Ops256>(_mm256_max_ps(_mm256_set1_ps(cephes_exp::kLowest), x), n);
    // 2^n from its exponent bits (n within [-126, 127] for x within [-87, 88]).
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_andnot_ps(tiny, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

// r[i] becomes the i-th values of r[0..7] (an 8 x 8 transpose).
inline void transpose8(__m256 r[8]) {
    __m256 a[8], b[8];
    for (int i = 0; i < 8; i += 2) a[i] = _mm256_unpacklo_ps(r[i], r[i + 1]), a[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    for (int i = 0; i < 8; i += 4)
        for (int h = 0; h < 2; ++h) {
            b[i + h] = _mm256_shuffle_ps(a[i + h], a[i + 2 + h], 0x44);
            b[i + 2 + h] = _mm256_shuffle_ps(a[i + h], a[i + 2 + h], 0xEE);
        }
    // b[0..3]: rows 0-3's values (0,4) (2,6)... in 128-bit halves; b[4..7]: rows 4-7's.
    const int order[4] = {0, 2, 1, 3};
    for (int i = 0; i < 4; ++i) {
        r[i] = _mm256_permute2f128_ps(b[order[i]], b[4 + order[i]], 0x20);
        r[i + 4] = _mm256_permute2f128_ps(b[order[i]], b[4 + order[i]], 0x31);
    }
}

// Keys scored together: two vectors of 8.
constexpr int kScoreKeys = 16;

// Scores of R rows against kScoreKeys keys transposed (kt[16 d + k]: key k's value d): one FMA
// chain over the dimensions a score, in order; each broadcast query value serves both vectors.
template <int R>
inline void score_rows(const float* const* q, const float* kt, int32_t hd, float* s, int64_t ld) {
    __m256 lo[R], hi[R];
    for (int r = 0; r < R; ++r) lo[r] = hi[r] = _mm256_setzero_ps();
    for (int32_t d = 0; d < hd; ++d) {
        const __m256 k0 = _mm256_loadu_ps(kt + kScoreKeys * d), k1 = _mm256_loadu_ps(kt + kScoreKeys * d + 8);
        for (int r = 0; r < R; ++r) {
            const __m256 x = _mm256_set1_ps(q[r][d]);
            lo[r] = _mm256_fmadd_ps(x, k0, lo[r]);
            hi[r] = _mm256_fmadd_ps(x, k1, hi[r]);
        }
    }
    for (int r = 0; r < R; ++r) _mm256_storeu_ps(s + r * ld, lo[r]), _mm256_storeu_ps(s + r * ld + 8, hi[r]);
}

// o[col, col + 8 NC) += s[k] * scale * values[k] over the keys in order, o held in registers.
template <int NC>
inline void weigh_chunk(const float* s, float scale, const float* const* values, int nb, int32_t col, float* o) {
    __m256 acc[NC];
    for (int c = 0; c < NC; ++c) acc[c] = _mm256_loadu_ps(o + col + 8 * c);
    for (int k = 0; k < nb; ++k) {
        const __m256 w = _mm256_set1_ps(s[k] * scale);
        for (int c = 0; c < NC; ++c) acc[c] = _mm256_fmadd_ps(w, _mm256_loadu_ps(values[k] + col + 8 * c), acc[c]);
    }
    for (int c = 0; c < NC; ++c) _mm256_storeu_ps(o + col + 8 * c, acc[c]);
}

struct Avx2Ops {
    // kScoreKeys keys at a time, transposed, for 4 rows at a time (the scores past nb are of
    // zero keys, within the row's scratch).
    static void scores(const float* const* q, int m, const float* const* keys, int nb, int32_t hd, float* s, int64_t ld) {
        thread_local std::vector<float> kt;  // kt[16 d + k]: key k's value d
        kt.resize(size_t(kScoreKeys) * hd);
        for (int k0 = 0; k0 < nb; k0 += kScoreKeys) {
            for (int half = 0; half < 2; ++half) {
                const int first = k0 + 8 * half, kn = std::clamp(nb - first, 0, 8);
                int32_t d = 0;
                for (; d + 8 <= hd; d += 8) {
                    __m256 r[8];
                    for (int i = 0; i < 8; ++i) r[i] = i < kn ? _mm256_loadu_ps(keys[first + i] + d) : _mm256_setzero_ps();
                    transpose8(r);
                    for (int i = 0; i < 8; ++i) _mm256_storeu_ps(kt.data() + kScoreKeys * (d + i) + 8 * half, r[i]);
                }
                for (; d < hd; ++d)
                    for (int i = 0; i < 8; ++i) kt[size_t(kScoreKeys * d + 8 * half + i)] = i < kn ? keys[first + i][d] : 0.0f;
            }
            int i = 0;
            for (; i + 4 <= m; i += 4) score_rows<4>(q + i, kt.data(), hd, s + i * ld + k0, ld);
            for (; i < m; ++i) score_rows<1>(q + i, kt.data(), hd, s + i * ld + k0, ld);
        }
    }
    static float max(const float* s, int64_t n) {
        __m256 acc = _mm256_set1_ps(-INFINITY);
        int64_t j = 0;
        for (; j + 8 <= n; j += 8) acc = _mm256_max_ps(acc, _mm256_loadu_ps(s + j));
        __m128 h = _mm_max_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
        h = _mm_max_ps(h, _mm_movehl_ps(h, h));
        float mx = _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
        for (; j < n; ++j) mx = std::max(mx, s[j]);
        return mx;
    }
    static void exp(float* s, int64_t n, float mx) {
        const __m256 m = _mm256_set1_ps(mx);
        int64_t j = 0;
        for (; j + 8 <= n; j += 8) _mm256_storeu_ps(s + j, exp256(_mm256_sub_ps(_mm256_loadu_ps(s + j), m)));
        if (j < n) {  // the rest through the same function
            alignas(32) float rest[8] = {};
            std::copy(s + j, s + n, rest);
            _mm256_store_ps(rest, exp256(_mm256_sub_ps(_mm256_load_ps(rest), m)));
            std::copy(rest, rest + (n - j), s + j);
        }
    }
    static float sum(const float* e, int64_t n) {
        __m256 acc = _mm256_setzero_ps();
        int64_t j = 0;
        for (; j + 8 <= n; j += 8) acc = _mm256_add_ps(acc, _mm256_loadu_ps(e + j));
        float sum = hsum8(acc);
        for (; j < n; ++j) sum += e[j];
        return sum;
    }
    static void weigh(const float* s, float scale, const float* const* values, int nb, float* o, int32_t n) {
        int32_t d = 0;
        for (; d + 64 <= n; d += 64) weigh_chunk<8>(s, scale, values, nb, d, o);
        for (; d + 8 <= n; d += 8) weigh_chunk<1>(s, scale, values, nb, d, o);
        for (; d < n; ++d)
            for (int k = 0; k < nb; ++k) {
                const float w = s[k] * scale;
                o[d] += w * values[k][d];
            }
    }
};
}  // namespace

void attention_tile_avx2(const AttentionTile& t) { detail::attention_tile_loop<Avx2Ops>(t); }

}  // namespace strata::cpu
