#include "cpu/quant_ref_low_bit.h"

#include "cpu/quant_ref.h"

// Written plainly from the block layouts in quant_ref.h, in the order of operations of ggml's
// dequantizers (and so gguf-py's); speed is the packers' job (pack_low_bit_avx512.h).
namespace strata::cpu {
namespace {

// Q2_K and Q3_K value k (0..255): half n = k/128 of qs, bit pair j = (k%128)/32 of byte
// qs[32n + k%32]; Q3_K's third bit is bit 4n + j of hmask[k%32].
int q2_value(const BlockQ2_K& b, int k) {
    const int n = k / 128, j = k % 128 / 32, l = k % 32;
    return (b.qs[32 * n + l] >> (2 * j)) & 3;
}
int q3_value(const BlockQ3_K& b, int k) {
    const int n = k / 128, j = k % 128 / 32, l = k % 32;
    const int q = (b.qs[32 * n + l] >> (2 * j)) & 3;
    const int h = (b.hmask[l] >> (4 * n + j)) & 1;
    return (q | h << 2) - 4;
}
// The codebook index of value j (0..31) of a 16-byte nibble block: low nibbles, then high.
int nibble(const uint8_t* qs, int j) { return j < 16 ? qs[j] & 0xF : qs[j - 16] >> 4; }
// A codebook block's scale: IQ4_NL's f16, MXFP4's power of two.
float block_scale(const BlockIQ4_NL& b) { return fp16_to_fp32(b.d); }
float block_scale(const BlockMXFP4& b) { return e8m0_to_fp32_half(b.e); }

}  // namespace

void dequantize_q2_k_ref(const void* src, float* y, int64_t n) {
    const auto* b = static_cast<const BlockQ2_K*>(src);
    for (int64_t i = 0; i < n / kQKK; ++i) {
        const float d = fp16_to_fp32(b[i].d), dmin = fp16_to_fp32(b[i].dmin);
        for (int g = 0; g < 16; ++g) {
            const float dl = d * float(b[i].scales[g] & 0xF), ml = dmin * float(b[i].scales[g] >> 4);
            for (int l = 0; l < 16; ++l) *y++ = dl * float(q2_value(b[i], 16 * g + l)) - ml;
        }
    }
}
void dequantize_q3_k_ref(const void* src, float* y, int64_t n) {
    const auto* b = static_cast<const BlockQ3_K*>(src);
    for (int64_t i = 0; i < n / kQKK; ++i) {
        const float d = fp16_to_fp32(b[i].d);
        for (int g = 0; g < 16; ++g) {
            const float dl = d * float(q3_scale(b[i], g));
            for (int l = 0; l < 16; ++l) *y++ = dl * float(q3_value(b[i], 16 * g + l));
        }
    }
}

namespace {

// The 32-value codebook types: x = scale * kValues[q] (a product of two floats, exact either way round).
template <class Block, const int8_t* kValues>
void dequantize_codebook(const void* src, float* y, int64_t n) {
    const auto* b = static_cast<const Block*>(src);
    for (int64_t i = 0; i < n / kQK; ++i) {
        const float d = block_scale(b[i]);
        for (int j = 0; j < kQK; ++j) *y++ = d * float(kValues[nibble(b[i].qs, j)]);
    }
}

}  // namespace

void dequantize_iq4_nl_ref(const void* src, float* y, int64_t n) { dequantize_codebook<BlockIQ4_NL, kIq4Values>(src, y, n); }
void dequantize_mxfp4_ref(const void* src, float* y, int64_t n) { dequantize_codebook<BlockMXFP4, kMxfp4Values>(src, y, n); }
void dequantize_iq4_xs_ref(const void* src, float* y, int64_t n) {
    const auto* b = static_cast<const BlockIQ4_XS*>(src);
    for (int64_t i = 0; i < n / kQKK; ++i) {
        const float d = fp16_to_fp32(b[i].d);
        for (int ib = 0; ib < 8; ++ib) {
            const float dl = d * float(iq4_xs_scale(b[i], ib));
            for (int j = 0; j < kQK; ++j) *y++ = dl * float(kIq4Values[nibble(b[i].qs + 16 * ib, j)]);
        }
    }
}

// Groups of 16 (activation block ab = 16i + g of 16, half g%2 of block ab/2): per group
// (scale * dc) * I, I = sum q c exact; Q2_K adds its minimum as -(dmin * m) * (dc * s16).
float dot_q2_k_ref(const void* w, const void* a, int64_t n) {
    const auto* b = static_cast<const BlockQ2_K*>(w);
    const ActQ8x2 v = act_q8x2(a, n);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / kQKK; ++i) {
        const float d = fp16_to_fp32(b[i].d), dmin = fp16_to_fp32(b[i].dmin);
        for (int g = 0; g < 16; ++g) {
            int32_t dot = 0;
            for (int l = 0; l < 16; ++l) dot += q2_value(b[i], 16 * g + l) * act_c(v, i * kQKK + 16 * g + l);
            const int64_t ab = i * 8 + g / 2;
            sum += d * float(b[i].scales[g] & 0xF) * v.dc[ab] * float(dot);
            sum += -(dmin * float(b[i].scales[g] >> 4)) * (v.dc[ab] * float(v.s16[i * 16 + g]));
        }
    }
    return sum;
}
float dot_q3_k_ref(const void* w, const void* a, int64_t n) {
    const auto* b = static_cast<const BlockQ3_K*>(w);
    const ActQ8x2 v = act_q8x2(a, n);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / kQKK; ++i) {
        const float d = fp16_to_fp32(b[i].d);
        for (int g = 0; g < 16; ++g) {
            int32_t dot = 0;
            for (int l = 0; l < 16; ++l) dot += q3_value(b[i], 16 * g + l) * act_c(v, i * kQKK + 16 * g + l);
            sum += d * float(q3_scale(b[i], g)) * v.dc[i * 8 + g / 2] * float(dot);
        }
    }
    return sum;
}

namespace {

// Blocks of 32 of a codebook type: (scale * dc) * I, I = sum kValues[q] c.
template <class Block, const int8_t* kValues>
float dot_codebook(const void* w, const void* a, int64_t n) {
    const auto* b = static_cast<const Block*>(w);
    const ActQ8x2 v = act_q8x2(a, n);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / kQK; ++i) {
        int32_t dot = 0;
        for (int j = 0; j < kQK; ++j) dot += kValues[nibble(b[i].qs, j)] * act_c(v, i * kQK + j);
        sum += block_scale(b[i]) * v.dc[i] * float(dot);
    }
    return sum;
}

}  // namespace

float dot_iq4_nl_ref(const void* w, const void* a, int64_t n) { return dot_codebook<BlockIQ4_NL, kIq4Values>(w, a, n); }
float dot_mxfp4_ref(const void* w, const void* a, int64_t n) { return dot_codebook<BlockMXFP4, kMxfp4Values>(w, a, n); }
float dot_iq4_xs_ref(const void* w, const void* a, int64_t n) {
    const auto* b = static_cast<const BlockIQ4_XS*>(w);
    const ActQ8x2 v = act_q8x2(a, n);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / kQKK; ++i) {
        const float d = fp16_to_fp32(b[i].d);
        for (int ib = 0; ib < 8; ++ib) {
            int32_t dot = 0;
            for (int j = 0; j < kQK; ++j)
                dot += kIq4Values[nibble(b[i].qs + 16 * ib, j)] * act_c(v, i * kQKK + 32 * ib + j);
            sum += d * float(iq4_xs_scale(b[i], ib)) * v.dc[i * 8 + ib] * float(dot);
        }
    }
    return sum;
}

}  // namespace strata::cpu
