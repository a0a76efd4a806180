#pragma once
// AVX-512 helpers shared by the kernels compiled for AVX-512 (attention, float matmul packing).
#include <immintrin.h>

namespace strata::cpu {

// A 16 x 16 float transpose in registers.
inline void transpose16(__m512 r[16]) {  // r[i][j] -> r[j][i]
    __m512 t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
        r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
        r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
        r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
    }
    for (int i = 0; i < 4; ++i) {
        t[i] = _mm512_shuffle_f32x4(r[i], r[4 + i], _MM_SHUFFLE(2, 0, 2, 0));
        t[4 + i] = _mm512_shuffle_f32x4(r[i], r[4 + i], _MM_SHUFFLE(3, 1, 3, 1));
        t[8 + i] = _mm512_shuffle_f32x4(r[8 + i], r[12 + i], _MM_SHUFFLE(2, 0, 2, 0));
        t[12 + i] = _mm512_shuffle_f32x4(r[8 + i], r[12 + i], _MM_SHUFFLE(3, 1, 3, 1));
    }
    for (int i = 0; i < 4; ++i) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[8 + i], _MM_SHUFFLE(2, 0, 2, 0));
        r[8 + i] = _mm512_shuffle_f32x4(t[i], t[8 + i], _MM_SHUFFLE(3, 1, 3, 1));
        r[4 + i] = _mm512_shuffle_f32x4(t[4 + i], t[12 + i], _MM_SHUFFLE(2, 0, 2, 0));
        r[12 + i] = _mm512_shuffle_f32x4(t[4 + i], t[12 + i], _MM_SHUFFLE(3, 1, 3, 1));
    }
}

}  // namespace strata::cpu
