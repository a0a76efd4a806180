#include "cpu/quant_ref.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "runtime/core/error.h"

// Written plainly from the block layouts in quant_ref.h; speed is quant_avx*.cpp's job.
namespace strata::cpu {
namespace {

uint32_t f32_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}
float f32_from(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
float h2f(f16_bits h) { return fp16_to_fp32(h); }

[[noreturn]] void no_kernel(DType t, const char* what) {
    throw BackendError("cpu: no " + std::string(what) + " kernel for type " + std::string(dtype_name(t)),
                       "CPU weight types: " + std::string(computable_dtype_list()));
}

// ---------------------------------------------------------------- dequantize
void deq_f32(const void* src, float* y, int64_t n) { std::memcpy(y, src, n * sizeof(float)); }
void deq_f16(const void* src, float* y, int64_t n) {
    const auto* x = static_cast<const f16_bits*>(src);
    for (int64_t i = 0; i < n; ++i) y[i] = h2f(x[i]);
}
void deq_bf16(const void* src, float* y, int64_t n) {
    const auto* x = static_cast<const uint16_t*>(src);
    for (int64_t i = 0; i < n; ++i) y[i] = bf16_to_fp32(x[i]);
}

// 32-blocks: byte j holds value j in its low nibble and value j+16 in its high nibble.
void deq_q4_0(const void* src, float* y, int64_t n) {
    const auto* b = static_cast<const BlockQ4_0*>(src);
    for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
        const float d = h2f(b[i].d);
        for (int j = 0; j < kQK / 2; ++j) {
            y[j] = d * float((b[i].qs[j] & 0xF) - 8);
            y[j + 16] = d * float((b[i].qs[j] >> 4) - 8);
        }
    }
}
void deq_q4_1(const void* src, float* y, int64_t n) {
    const auto* b = static_cast<const BlockQ4_1*>(src);
    for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
        const float d = h2f(b[i].d), m = h2f(b[i].m);
        for (int j = 0; j < kQK / 2; ++j) {
            y[j] = d * float(b[i].qs[j] & 0xF) + m;
            y[j + 16] = d * float(b[i].qs[j] >> 4) + m;
        }
    }
}
// Q5: bit j of the little-endian 32-bit qh is the fifth bit of value j.
uint32_t load_qh(const uint8_t* qh) { return uint32_t(qh[0]) | uint32_t(qh[1]) << 8 | uint32_t(qh[2]) << 16 | uint32_t(qh[3]) << 24; }
void deq_q5_0(const void* src, float* y, int64_t n) {
    const auto* b = static_cast<const BlockQ5_0*>(src);
    for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
        const float d = h2f(b[i].d);
        const uint32_t qh = load_qh(b[i].qh);
        for (int j = 0; j < kQK / 2; ++j) {
            const int lo = (b[i].qs[j] & 0xF) | int((qh >> j) & 1) << 4;
            const int hi = (b[i].qs[j] >> 4) | int((qh >> (j + 16)) & 1) << 4;
            y[j] = d * float(lo - 16);
            y[j + 16] = d * float(hi - 16);
        }
    }
}
void deq_q5_1(const void* src, float* y, int64_t n) {
    const auto* b = static_cast<const BlockQ5_1*>(src);
    for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
        const float d = h2f(b[i].d), m = h2f(b[i].m);
        const uint32_t qh = load_qh(b[i].qh);
        for (int j = 0; j < kQK / 2; ++j) {
            const int lo = (b[i].qs[j] & 0xF) | int((qh >> j) & 1) << 4;
            const int hi = (b[i].qs[j] >> 4) | int((qh >> (j + 16)) & 1) << 4;
            y[j] = d * float(lo) + m;
            y[j + 16] = d * float(hi) + m;
        }
    }
}
void deq_q8_0(const void* src, float* y, int64_t n) {
    const auto* b = static_cast<const BlockQ8_0*>(src);
    for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
        const float d = h2f(b[i].d);
        for (int j = 0; j < kQK; ++j) y[j] = d * float(b[i].qs[j]);
    }
}
// Q4_K: each 64 values share 32 bytes: low nibbles are sub-block 2c, high nibbles 2c+1.
void deq_q4_k(const void* src, float* y, int64_t n) {
    const auto* b = static_cast<const BlockQ4_K*>(src);
    for (int64_t i = 0; i < n / kQKK; ++i) {
        const float d = h2f(b[i].d), dmin = h2f(b[i].dmin);
        const uint8_t* q = b[i].qs;
        for (int c = 0; c < 4; ++c, q += 32) {
            uint8_t sc0, m0, sc1, m1;
            k4_scale_min(2 * c, b[i].scales, sc0, m0);
            k4_scale_min(2 * c + 1, b[i].scales, sc1, m1);
            const float d0 = d * float(sc0), dm0 = dmin * float(m0);
            const float d1 = d * float(sc1), dm1 = dmin * float(m1);
            for (int l = 0; l < 32; ++l) *y++ = d0 * float(q[l] & 0xF) - dm0;
            for (int l = 0; l < 32; ++l) *y++ = d1 * float(q[l] >> 4) - dm1;
        }
    }
}
// Q5_K: as Q4_K, plus bit 2c (2c+1) of qh[l] is the fifth bit of value l of sub-block 2c (2c+1).
void deq_q5_k(const void* src, float* y, int64_t n) {
    const auto* b = static_cast<const BlockQ5_K*>(src);
    for (int64_t i = 0; i < n / kQKK; ++i) {
        const float d = h2f(b[i].d), dmin = h2f(b[i].dmin);
        const uint8_t* q = b[i].qs;
        for (int c = 0; c < 4; ++c, q += 32) {
            uint8_t sc0, m0, sc1, m1;
            k4_scale_min(2 * c, b[i].scales, sc0, m0);
            k4_scale_min(2 * c + 1, b[i].scales, sc1, m1);
            const float d0 = d * float(sc0), dm0 = dmin * float(m0);
            const float d1 = d * float(sc1), dm1 = dmin * float(m1);
            for (int l = 0; l < 32; ++l)
                *y++ = d0 * float((q[l] & 0xF) | ((b[i].qh[l] >> (2 * c)) & 1) << 4) - dm0;
            for (int l = 0; l < 32; ++l)
                *y++ = d1 * float((q[l] >> 4) | ((b[i].qh[l] >> (2 * c + 1)) & 1) << 4) - dm1;
        }
    }
}
// Q6_K value k (0..255) of a block: half h = k/128, r = k%128, quarter s = r/32, l = r%32.
// Low 4 bits: ql[64h + l + 32(s&1)], nibble s>>1; high 2 bits: qh[32h + l] >> 2s. Scale k/16.
int q6_value(const BlockQ6_K& b, int k) {
    const int h = k / 128, r = k % 128, s = r / 32, l = r % 32;
    const uint8_t ql = b.ql[64 * h + l + 32 * (s & 1)];
    const int lo = (s >> 1) ? (ql >> 4) : (ql & 0xF);
    const int hi = (b.qh[32 * h + l] >> (2 * s)) & 3;
    return (lo | hi << 4) - 32;
}
void deq_q6_k(const void* src, float* y, int64_t n) {
    const auto* b = static_cast<const BlockQ6_K*>(src);
    for (int64_t i = 0; i < n / kQKK; ++i) {
        const float d = h2f(b[i].d);
        for (int k = 0; k < kQKK; ++k) *y++ = d * float(b[i].scales[k / 16]) * float(q6_value(b[i], k));
    }
}
void deq_q8_k(const void* src, float* y, int64_t n) {
    const auto* b = static_cast<const BlockQ8_K*>(src);
    for (int64_t i = 0; i < n / kQKK; ++i)
        for (int k = 0; k < kQKK; ++k) *y++ = b[i].d * float(b[i].qs[k]);
}

// ---------------------------------------------------------------- quantize (activations)
void quant_f32(const float* x, void* dst, int64_t n) { std::memcpy(dst, x, n * sizeof(float)); }
void quant_bf16(const float* x, void* dst, int64_t n) {
    auto* y = static_cast<uint16_t*>(dst);
    for (int64_t i = 0; i < n; ++i) y[i] = fp32_to_bf16(x[i]);
}
// Symmetric int8 with scale amax/127. nearbyint rounds half to even, as the SIMD converts do.
float amax_of(const float* x, int n) {
    float amax = 0.0f;
    for (int j = 0; j < n; ++j) amax = std::max(amax, std::fabs(x[j]));
    return amax;
}
void quant_q8_0(const float* x, void* dst, int64_t n) {
    auto* y = static_cast<BlockQ8_0*>(dst);
    for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
        const float d = amax_of(x, kQK) / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        for (int j = 0; j < kQK; ++j) y[i].qs[j] = static_cast<int8_t>(std::nearbyint(x[j] * id));
    }
}
void quant_q8_k(const float* x, void* dst, int64_t n) {
    auto* y = static_cast<BlockQ8_K*>(dst);
    for (int64_t i = 0; i < n / kQKK; ++i, x += kQKK) {
        const float d = amax_of(x, kQKK) / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = d;
        for (int j = 0; j < kQKK; ++j) y[i].qs[j] = static_cast<int8_t>(std::nearbyint(x[j] * id));
        for (int g = 0; g < kQKK / 16; ++g) {
            int sum = 0;
            for (int j = 0; j < 16; ++j) sum += y[i].qs[16 * g + j];
            y[i].bsums[g] = static_cast<int16_t>(sum);
        }
    }
}

// ---------------------------------------------------------------- vec_dot
float dot_f32(const void* w, const void* a, int64_t n) {
    const auto* x = static_cast<const float*>(w);
    const auto* y = static_cast<const float*>(a);
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) sum += x[i] * y[i];
    return sum;
}
float dot_f16(const void* w, const void* a, int64_t n) {
    const auto* x = static_cast<const f16_bits*>(w);
    const auto* y = static_cast<const float*>(a);
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) sum += h2f(x[i]) * y[i];
    return sum;
}
float dot_bf16(const void* w, const void* a, int64_t n) {
    const auto* x = static_cast<const uint16_t*>(w);
    const auto* y = static_cast<const uint16_t*>(a);
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) sum += bf16_to_fp32(x[i]) * bf16_to_fp32(y[i]);
    return sum;
}
// 32-block weights against Q8_0: integer dot per block, then d_w * d_a (+ min * d_a * sum(a)).
template <class Block, int kOffset, bool kHasMin, bool kFive>
float dot_q_x_q8_0(const void* w, const void* a, int64_t n) {
    const auto* b = static_cast<const Block*>(w);
    const auto* y = static_cast<const BlockQ8_0*>(a);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / kQK; ++i) {
        uint32_t qh = 0;
        if constexpr (kFive) qh = load_qh(b[i].qh);
        int dot = 0, asum = 0;
        for (int j = 0; j < kQK / 2; ++j) {
            int lo = b[i].qs[j] & 0xF, hi = b[i].qs[j] >> 4;
            if constexpr (kFive) {
                lo |= int((qh >> j) & 1) << 4;
                hi |= int((qh >> (j + 16)) & 1) << 4;
            }
            dot += (lo - kOffset) * y[i].qs[j] + (hi - kOffset) * y[i].qs[j + 16];
            asum += y[i].qs[j] + y[i].qs[j + 16];
        }
        const float da = h2f(y[i].d);
        sum += h2f(b[i].d) * da * float(dot);
        if constexpr (kHasMin) sum += h2f(b[i].m) * da * float(asum);
    }
    return sum;
}
float dot_q8_0(const void* w, const void* a, int64_t n) {
    const auto* b = static_cast<const BlockQ8_0*>(w);
    const auto* y = static_cast<const BlockQ8_0*>(a);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / kQK; ++i) {
        int dot = 0;
        for (int j = 0; j < kQK; ++j) dot += b[i].qs[j] * y[i].qs[j];
        sum += h2f(b[i].d) * h2f(y[i].d) * float(dot);
    }
    return sum;
}
// K-quants against Q8_K: per block, d * d_a * sum_j(scale_j * dot_j) - dmin * d_a * sum_j(min_j * asum_j).
float dot_q4_k(const void* w, const void* a, int64_t n) {
    const auto* b = static_cast<const BlockQ4_K*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / kQKK; ++i) {
        int sdot = 0, smin = 0;
        for (int j = 0; j < 8; ++j) {
            uint8_t sc, m;
            k4_scale_min(j, b[i].scales, sc, m);
            const uint8_t* q = b[i].qs + 32 * (j / 2);
            int dot = 0;
            for (int l = 0; l < 32; ++l) dot += ((j & 1) ? q[l] >> 4 : q[l] & 0xF) * y[i].qs[32 * j + l];
            sdot += sc * dot;
            smin += m * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
        }
        sum += h2f(b[i].d) * y[i].d * float(sdot) - h2f(b[i].dmin) * y[i].d * float(smin);
    }
    return sum;
}
float dot_q5_k(const void* w, const void* a, int64_t n) {
    const auto* b = static_cast<const BlockQ5_K*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / kQKK; ++i) {
        int sdot = 0, smin = 0;
        for (int j = 0; j < 8; ++j) {
            uint8_t sc, m;
            k4_scale_min(j, b[i].scales, sc, m);
            const uint8_t* q = b[i].qs + 32 * (j / 2);
            int dot = 0;
            for (int l = 0; l < 32; ++l) {
                const int v = ((j & 1) ? q[l] >> 4 : q[l] & 0xF) | ((b[i].qh[l] >> j) & 1) << 4;
                dot += v * y[i].qs[32 * j + l];
            }
            sdot += sc * dot;
            smin += m * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
        }
        sum += h2f(b[i].d) * y[i].d * float(sdot) - h2f(b[i].dmin) * y[i].d * float(smin);
    }
    return sum;
}
float dot_q6_k(const void* w, const void* a, int64_t n) {
    const auto* b = static_cast<const BlockQ6_K*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / kQKK; ++i) {
        int sdot = 0;
        for (int g = 0; g < 16; ++g) {
            int dot = 0;
            for (int l = 0; l < 16; ++l) dot += q6_value(b[i], 16 * g + l) * y[i].qs[16 * g + l];
            sdot += b[i].scales[g] * dot;
        }
        sum += h2f(b[i].d) * y[i].d * float(sdot);
    }
    return sum;
}
float dot_q8_k(const void* w, const void* a, int64_t n) {
    const auto* b = static_cast<const BlockQ8_K*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / kQKK; ++i) {
        int dot = 0;
        for (int k = 0; k < kQKK; ++k) dot += b[i].qs[k] * y[i].qs[k];
        sum += b[i].d * y[i].d * float(dot);
    }
    return sum;
}

using DotFn = float (*)(const void*, const void*, int64_t);
template <DotFn kDot>
void dot_rows(const void* w, const void* acts, size_t stride, int n_tok, int64_t n, float* out) {
    for (int t = 0; t < n_tok; ++t) out[t] = kDot(w, static_cast<const uint8_t*>(acts) + t * stride, n);
}

struct RefEntry {
    DType type;
    DequantizeFn dequantize;
    DotFn dot;
    VecDotFn dot_rows;
    QuantizeFn quantize;
};
#define STRATA_DOT(fn) fn, dot_rows<fn>
const RefEntry kRef[] = {
    {DType::F32, deq_f32, STRATA_DOT(dot_f32), quant_f32},
    {DType::F16, deq_f16, STRATA_DOT(dot_f16), nullptr},
    {DType::BF16, deq_bf16, STRATA_DOT(dot_bf16), quant_bf16},
    {DType::Q4_0, deq_q4_0, STRATA_DOT((dot_q_x_q8_0<BlockQ4_0, 8, false, false>)), nullptr},
    {DType::Q4_1, deq_q4_1, STRATA_DOT((dot_q_x_q8_0<BlockQ4_1, 0, true, false>)), nullptr},
    {DType::Q5_0, deq_q5_0, STRATA_DOT((dot_q_x_q8_0<BlockQ5_0, 16, false, true>)), nullptr},
    {DType::Q5_1, deq_q5_1, STRATA_DOT((dot_q_x_q8_0<BlockQ5_1, 0, true, true>)), nullptr},
    {DType::Q8_0, deq_q8_0, STRATA_DOT(dot_q8_0), quant_q8_0},
    {DType::Q4_K, deq_q4_k, STRATA_DOT(dot_q4_k), nullptr},
    {DType::Q5_K, deq_q5_k, STRATA_DOT(dot_q5_k), nullptr},
    {DType::Q6_K, deq_q6_k, STRATA_DOT(dot_q6_k), nullptr},
    {DType::Q8_K, deq_q8_k, STRATA_DOT(dot_q8_k), quant_q8_k},
};
#undef STRATA_DOT

const RefEntry* find_ref(DType t) {
    for (const auto& e : kRef)
        if (e.type == t) return &e;
    return nullptr;
}

}  // namespace

float fp16_to_fp32(f16_bits h) {
    const uint32_t sign = uint32_t(h & 0x8000) << 16;
    const uint32_t exp = (h >> 10) & 0x1F;
    uint32_t mant = h & 0x3FF;
    if (exp == 0x1F) return f32_from(sign | 0x7F800000 | mant << 13);  // inf / NaN
    if (exp != 0) return f32_from(sign | (exp + 112) << 23 | mant << 13);
    if (mant == 0) return f32_from(sign);
    int shifts = 0;  // subnormal: normalise the mantissa
    while (!(mant & 0x400)) {
        mant <<= 1;
        ++shifts;
    }
    return f32_from(sign | uint32_t(113 - shifts) << 23 | (mant & 0x3FF) << 13);
}

f16_bits fp32_to_fp16(float f) {
    const uint32_t x = f32_bits(f);
    const auto sign = static_cast<f16_bits>((x >> 16) & 0x8000);
    const uint32_t ax = x & 0x7FFFFFFF;
    if (ax > 0x7F800000) return sign | 0x7E00 | ((ax >> 13) & 0x3FF);  // NaN, made quiet
    if (ax >= 0x477FF000) return sign | 0x7C00;                          // rounds past 65504: inf
    if (ax >= 0x38800000) {                                               // normal half
        uint32_t r = ax - 0x38000000;                                     // rebias 127 -> 15
        r += 0xFFF + ((r >> 13) & 1);                                     // round half to even
        return sign | static_cast<f16_bits>(r >> 13);
    }
    if (ax <= 0x33000000) return sign;  // at most half the smallest subnormal: zero (ties to even)
    const uint32_t e = ax >> 23, m = (ax & 0x7FFFFF) | 0x800000;
    const uint32_t shift = 126 - e;  // value / 2^-24 = m >> shift
    uint32_t q = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1))) ++q;
    return sign | static_cast<f16_bits>(q);
}

uint16_t fp32_to_bf16(float f) {
    const uint32_t u = f32_bits(f);
    if ((u & 0x7FFFFFFF) > 0x7F800000) return static_cast<uint16_t>((u >> 16) | 64);
    return static_cast<uint16_t>((u + (0x7FFF + ((u >> 16) & 1))) >> 16);
}

void dequantize_row_ref(DType type, const void* src, float* dst, int64_t n) {
    const RefEntry* e = find_ref(type);
    if (!e) no_kernel(type, "dequantize");
    STRATA_ASSERT(n % traits(type).block_elems == 0);
    e->dequantize(src, dst, n);
}

void quantize_row_ref(DType act_type, const float* x, void* dst, int64_t n) {
    const RefEntry* e = find_ref(act_type);
    if (!e || !e->quantize) no_kernel(act_type, "quantize");
    STRATA_ASSERT(n % traits(act_type).block_elems == 0);
    e->quantize(x, dst, n);
}

float vec_dot_ref(DType weight_type, const void* weight_row, const void* acts, int64_t n) {
    const RefEntry* e = find_ref(weight_type);
    if (!e) no_kernel(weight_type, "vec_dot");
    STRATA_ASSERT(n % traits(weight_type).block_elems == 0);
    return e->dot(weight_row, acts, n);
}

QuantKernels ref_kernels(DType type) {
    const RefEntry* e = find_ref(type);
    if (!e) return {};
    return {e->dequantize, e->dot_rows, e->quantize};
}

}  // namespace strata::cpu
