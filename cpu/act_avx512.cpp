// AVX-512 element-wise activations (norm_rope_act.h dispatches here on the avx512 path).
#include <immintrin.h>

#include "cpu/exp_avx512.h"
#include "cpu/gemm_x86.h"

namespace strata::cpu {

// gate = gate / (1 + e^-gate) * up, as the scalar code, with exp512 for e^x (about 2 ulp).
void swiglu_avx512(float* gate, const float* up, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 k = n - i >= 16 ? 0xFFFF : __mmask16((1u << (n - i)) - 1);
        const __m512 g = _mm512_maskz_loadu_ps(k, gate + i);
        const __m512 e = exp512(_mm512_sub_ps(_mm512_setzero_ps(), g));
        const __m512 s = _mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
        _mm512_mask_storeu_ps(gate + i, k, _mm512_mul_ps(s, _mm512_maskz_loadu_ps(k, up + i)));
    }
}

}  // namespace strata::cpu
