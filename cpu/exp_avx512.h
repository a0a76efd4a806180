#pragma once
// e^x on 16 floats, for files built with -mavx512f (attention_avx512.cpp, act_avx512.cpp).
#include <immintrin.h>

#include "cpu/exp_cephes.h"

namespace strata::cpu {

struct Ops512 {
    static __m512 set1(float a) { return _mm512_set1_ps(a); }
    static __m512 mul(__m512 a, __m512 b) { return _mm512_mul_ps(a, b); }
    static __m512 add(__m512 a, __m512 b) { return _mm512_add_ps(a, b); }
    static __m512 fmadd(__m512 a, __m512 b, __m512 c) { return _mm512_fmadd_ps(a, b, c); }
    static __m512 fnmadd(__m512 a, __m512 b, __m512 c) { return _mm512_fnmadd_ps(a, b, c); }
    static __m512 round(__m512 a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
};

// cephes' expf (exp_cephes.h): about 2 ulp for x in [-87, 88]; below -87 gives about 0
// (e^-87), above 88 gives inf.
inline __m512 exp512(__m512 x) {
    __m512 n;
    const __m512 p = cephes_exp::reduced<Ops512>(_mm512_max_ps(x, _mm512_set1_ps(cephes_exp::kLowest)), n);
    return _mm512_scalef_ps(p, n);
}

}  // namespace strata::cpu
