#pragma once
// cephes' expf, evaluated by the vector e^x of each SIMD path (exp_avx512.h, attention_avx2.cpp):
// x = n ln2 + r with n = round(x log2 e) and ln 2 in two parts, then e^r = 1 + r + r^2 p(r);
// about 2 ulp for x in [-87, 88]. Each path scales e^r by 2^n its own way.
namespace strata::cpu::cephes_exp {

inline constexpr float kLowest = -87.0f;  // below, e^x is about 0 (e^-87 is 1.6e-38)

// e^r of x's reduction, n into `n`. `V` gives the vector type's operations: set1, mul, add,
// fmadd(a, b, c) = a b + c, fnmadd(a, b, c) = c - a b and round (to nearest). x >= kLowest.
template <class V, class Vec>
Vec reduced(Vec x, Vec& n) {
    constexpr float kPoly[] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                               4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};
    n = V::round(V::mul(x, V::set1(1.44269504088896341f)));
    Vec r = V::fnmadd(n, V::set1(0.693359375f), x);
    r = V::fnmadd(n, V::set1(-2.12194440e-4f), r);
    Vec p = V::set1(kPoly[0]);
    for (int i = 1; i < 6; ++i) p = V::fmadd(p, r, V::set1(kPoly[i]));
    return V::fmadd(p, V::mul(r, r), V::add(r, V::set1(1.0f)));
}

}  // namespace strata::cpu::cephes_exp
