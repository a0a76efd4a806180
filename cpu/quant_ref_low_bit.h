#pragma once
// Internal to cpu/: the scalar reference kernels of Q2_K, Q3_K, IQ4_NL, IQ4_XS and MXFP4
// (quant_ref_low_bit.cpp), entered in quant_ref.cpp's table beside the other types'.
#include <cstdint>

#include "cpu/quant_ref.h"

namespace strata::cpu {

// In an unnamed namespace: each file keeps its own copy, built with its own flags (the AVX2
// kernels' among them).
namespace {
// Q3_K scale of group g (0..15): low 4 bits in the nibbles of bytes 0-7 (groups 0-7 low,
// 8-15 high), high 2 bits in bits 2(g/4) of byte 8 + g%4; stored as sc + 32.
inline int q3_scale(const BlockQ3_K& b, int g) {
    const int lo = g < 8 ? b.scales[g] & 0xF : b.scales[g - 8] >> 4;
    const int hi = (b.scales[8 + g % 4] >> (2 * (g / 4))) & 3;
    return (lo | hi << 4) - 32;
}
// IQ4_XS sub-block ib's (0..7) scale in units of d: its 6 bits (4 in scales_l, 2 in scales_h)
// less 32.
inline int iq4_xs_scale(const BlockIQ4_XS& b, int ib) {
    const int lo = (b.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF;
    const int hi = (b.scales_h >> (2 * ib)) & 3;
    return (lo | hi << 4) - 32;
}
}  // namespace

void dequantize_q2_k_ref(const void* src, float* y, int64_t n);
void dequantize_q3_k_ref(const void* src, float* y, int64_t n);
void dequantize_iq4_nl_ref(const void* src, float* y, int64_t n);
void dequantize_iq4_xs_ref(const void* src, float* y, int64_t n);
void dequantize_mxfp4_ref(const void* src, float* y, int64_t n);
// Dot of a weight row with a Q8x2 activation row (quant_ref.h's vec_dot_ref contract).
float dot_q2_k_ref(const void* w, const void* a, int64_t n);
float dot_q3_k_ref(const void* w, const void* a, int64_t n);
float dot_iq4_nl_ref(const void* w, const void* a, int64_t n);
float dot_iq4_xs_ref(const void* w, const void* a, int64_t n);
float dot_mxfp4_ref(const void* w, const void* a, int64_t n);

}  // namespace strata::cpu
