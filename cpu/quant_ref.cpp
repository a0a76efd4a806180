#include "cpu/quant_ref.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>

#include "core/error.h"
#include "cpu/quant_ref_low_bit.h"

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
// Blocks whose amax is below this (or NaN) are stored as zeros: 1/d would overflow.
constexpr float kTinyAmax = 1e-30f;
template <bool kTwoLevel>
void quant_q8x2(const float* x, void* dst, int64_t n) {
    const ActQ8x2 v = act_q8x2(dst, n);
    for (int64_t b = 0; b < n / kActBlock; ++b) {
        const float* xb = x + b * kActBlock;
        float amax = 0.0f;
        for (int j = 0; j < kActBlock; ++j) amax = std::max(amax, std::fabs(xb[j]));
        int32_t s16[2] = {0, 0};
        float d = 0.0f;
        if (amax >= kTinyAmax) {
            d = amax / 127.0f;
            const float id = 1.0f / d, id256 = id * 256.0f;
            for (int j = 0; j < kActBlock; ++j) {
                const float h = std::nearbyint(xb[j] * id);
                const float r = std::fma(-d, h, xb[j]);
                const float l = kTwoLevel ? std::clamp(std::nearbyint(r * id256), -127.0f, 127.0f) : 0.0f;
                v.hi[b * kActBlock + j] = static_cast<int8_t>(h);
                v.lo[b * kActBlock + j] = static_cast<int8_t>(l);
                s16[j / 16] += 256 * static_cast<int32_t>(h) + static_cast<int32_t>(l);
            }
        } else {
            std::memset(v.hi + b * kActBlock, 0, kActBlock);
            std::memset(v.lo + b * kActBlock, 0, kActBlock);
        }
        finish_q8x2_block(v, b, d, s16);
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
    const auto* y = static_cast<const float*>(a);
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) sum += bf16_to_fp32(x[i]) * y[i];
    return sum;
}
// 32-block weights: w = d * (q - offset) [+ m]. Block term (d * dc) * I [+ m * dcs].
template <class Block, int kOffset, bool kHasMin, bool kFive>
float dot_q32(const void* w, const void* a, int64_t n) {
    const auto* b = static_cast<const Block*>(w);
    const ActQ8x2 v = act_q8x2(a, n);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / kQK; ++i) {
        uint32_t qh = 0;
        if constexpr (kFive) qh = load_qh(b[i].qh);
        int32_t dot = 0;
        for (int j = 0; j < kQK / 2; ++j) {
            int lo = b[i].qs[j] & 0xF, hi = b[i].qs[j] >> 4;
            if constexpr (kFive) {
                lo |= int((qh >> j) & 1) << 4;
                hi |= int((qh >> (j + 16)) & 1) << 4;
            }
            dot += (lo - kOffset) * act_c(v, i * kQK + j) + (hi - kOffset) * act_c(v, i * kQK + j + 16);
        }
        sum += h2f(b[i].d) * v.dc[i] * float(dot);
        if constexpr (kHasMin) sum += h2f(b[i].m) * v.dcs[i];
    }
    return sum;
}
float dot_q8_0(const void* w, const void* a, int64_t n) {
    const auto* b = static_cast<const BlockQ8_0*>(w);
    const ActQ8x2 v = act_q8x2(a, n);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / kQK; ++i) {
        int32_t dot = 0;
        for (int j = 0; j < kQK; ++j) dot += b[i].qs[j] * act_c(v, i * kQK + j);
        sum += h2f(b[i].d) * v.dc[i] * float(dot);
    }
    return sum;
}
// Q4_K / Q5_K: sub-block j of 32 is activation block 8i + j: (d * sc_j * dc) * I - (dmin * m_j) * dcs.
template <bool kFive>
float dot_q45_k(const void* w, const void* a, int64_t n) {
    using Block = std::conditional_t<kFive, BlockQ5_K, BlockQ4_K>;
    const auto* b = static_cast<const Block*>(w);
    const ActQ8x2 v = act_q8x2(a, n);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / kQKK; ++i) {
        const float d = h2f(b[i].d), dmin = h2f(b[i].dmin);
        for (int j = 0; j < 8; ++j) {
            uint8_t sc, m;
            k4_scale_min(j, b[i].scales, sc, m);
            const uint8_t* q = b[i].qs + 32 * (j / 2);
            int32_t dot = 0;
            for (int l = 0; l < 32; ++l) {
                int val = (j & 1) ? q[l] >> 4 : q[l] & 0xF;
                if constexpr (kFive) val |= ((b[i].qh[l] >> j) & 1) << 4;
                dot += val * act_c(v, i * kQKK + 32 * j + l);
            }
            const int64_t ab = i * 8 + j;
            sum += d * float(sc) * v.dc[ab] * float(dot);
            sum += -(dmin * float(m)) * v.dcs[ab];
        }
    }
    return sum;
}
// Q6_K: 16 groups of 16 with int8 scales: per group (d * sc_g * dc) * I_g, I_g = sum (q - 32) c.
float dot_q6_k(const void* w, const void* a, int64_t n) {
    const auto* b = static_cast<const BlockQ6_K*>(w);
    const ActQ8x2 v = act_q8x2(a, n);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / kQKK; ++i) {
        const float d = h2f(b[i].d);
        for (int g = 0; g < 16; ++g) {
            int32_t dot = 0;
            for (int l = 0; l < 16; ++l) dot += q6_value(b[i], 16 * g + l) * act_c(v, i * kQKK + 16 * g + l);
            sum += d * float(b[i].scales[g]) * v.dc[i * 8 + g / 2] * float(dot);
        }
    }
    return sum;
}
// Q8_K (as weights): one float scale per 256; per activation block (d * dc) * I.
float dot_q8_k(const void* w, const void* a, int64_t n) {
    const auto* b = static_cast<const BlockQ8_K*>(w);
    const ActQ8x2 v = act_q8x2(a, n);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / kQKK; ++i) {
        for (int j = 0; j < 8; ++j) {
            int32_t dot = 0;
            for (int l = 0; l < 32; ++l) dot += b[i].qs[32 * j + l] * act_c(v, i * kQKK + 32 * j + l);
            sum += b[i].d * v.dc[i * 8 + j] * float(dot);
        }
    }
    return sum;
}

using DotFn = float (*)(const void*, const void*, int64_t);
template <DotFn kDot>
void dot_rows(const MatmulJob& job, int64_t r0, int64_t r1) {
    for (int64_t t = 0; t < job.n_tok; ++t)
        for (int64_t r = r0; r < r1; ++r)
            job.y[t * job.ldy + r] = kDot(job.w + r * job.w_stride, job.acts + t * job.a_stride, job.n_cols);
}

struct RefEntry {
    DType type;
    DequantizeFn dequantize;
    DotFn dot;
    MatmulRowsFn matmul_rows;
};
#define STRATA_DOT(fn) fn, dot_rows<fn>
const RefEntry kRef[] = {
    {DType::F32, deq_f32, STRATA_DOT(dot_f32)},
    {DType::F16, deq_f16, STRATA_DOT(dot_f16)},
    {DType::BF16, deq_bf16, STRATA_DOT(dot_bf16)},
    {DType::Q4_0, deq_q4_0, STRATA_DOT((dot_q32<BlockQ4_0, 8, false, false>))},
    {DType::Q4_1, deq_q4_1, STRATA_DOT((dot_q32<BlockQ4_1, 0, true, false>))},
    {DType::Q5_0, deq_q5_0, STRATA_DOT((dot_q32<BlockQ5_0, 16, false, true>))},
    {DType::Q5_1, deq_q5_1, STRATA_DOT((dot_q32<BlockQ5_1, 0, true, true>))},
    {DType::Q8_0, deq_q8_0, STRATA_DOT(dot_q8_0)},
    {DType::Q4_K, deq_q4_k, STRATA_DOT(dot_q45_k<false>)},
    {DType::Q5_K, deq_q5_k, STRATA_DOT(dot_q45_k<true>)},
    {DType::Q6_K, deq_q6_k, STRATA_DOT(dot_q6_k)},
    {DType::Q8_K, deq_q8_k, STRATA_DOT(dot_q8_k)},
    {DType::Q2_K, dequantize_q2_k_ref, STRATA_DOT(dot_q2_k_ref)},
    {DType::Q3_K, dequantize_q3_k_ref, STRATA_DOT(dot_q3_k_ref)},
    {DType::IQ4_NL, dequantize_iq4_nl_ref, STRATA_DOT(dot_iq4_nl_ref)},
    {DType::IQ4_XS, dequantize_iq4_xs_ref, STRATA_DOT(dot_iq4_xs_ref)},
    {DType::MXFP4, dequantize_mxfp4_ref, STRATA_DOT(dot_mxfp4_ref)},
};
#undef STRATA_DOT

const RefEntry* find_ref(DType t) {
    for (const auto& e : kRef)
        if (e.type == t) return &e;
    return nullptr;
}

}  // namespace

F16ScaleFields f16_scale_fields(DType type) {
    switch (type) {
        case DType::Q4_0: case DType::Q5_0: case DType::Q8_0: case DType::IQ4_NL: case DType::IQ4_XS: return {1, {0}};
        case DType::Q4_1: case DType::Q5_1: case DType::Q4_K: case DType::Q5_K: return {2, {0, 2}};
        case DType::Q6_K: return {1, {offsetof(BlockQ6_K, d)}};
        case DType::Q2_K: return {2, {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)}};
        case DType::Q3_K: return {1, {offsetof(BlockQ3_K, d)}};
        default: return {};
    }
}

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

void quantize_act_ref(ActFormat fmt, const float* x, void* dst, int64_t n) {
    if (fmt == ActFormat::F32) return quant_f32(x, dst, n);
    STRATA_ASSERT(n % kActBlock == 0);
    if (fmt == ActFormat::Q8) return quant_q8x2<false>(x, dst, n);
    quant_q8x2<true>(x, dst, n);
}

void dequantize_act_ref(ActFormat fmt, const void* src, float* dst, int64_t n) {
    if (fmt == ActFormat::F32) return deq_f32(src, dst, n);
    const ActQ8x2 v = act_q8x2(src, n);
    for (int64_t i = 0; i < n; ++i) dst[i] = v.dc[i / kActBlock] * float(act_c(v, i));
}

float vec_dot_ref(DType weight_type, const void* weight_row, const void* act_row, int64_t n) {
    const RefEntry* e = find_ref(weight_type);
    if (!e) no_kernel(weight_type, "vec_dot");
    STRATA_ASSERT(n % traits(weight_type).block_elems == 0);
    return e->dot(weight_row, act_row, n);
}

QuantKernels ref_kernels(DType type) {
    const RefEntry* e = find_ref(type);
    if (!e) return {};
    return {e->dequantize, e->matmul_rows};
}

ActKernels ref_act_kernels(ActFormat fmt) {
    return {fmt == ActFormat::F32 ? quant_f32 : fmt == ActFormat::Q8 ? quant_q8x2<false> : quant_q8x2<true>};
}

}  // namespace strata::cpu
