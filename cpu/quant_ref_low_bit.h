#pragma once
// Internal to cpu/: the scalar reference kernels of Q2_K, Q3_K, IQ4_NL, IQ4_XS and MXFP4
// (quant_ref_low_bit.cpp), entered in quant_ref.cpp's table beside the other types'.
#include <cstdint>

namespace strata::cpu {

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
