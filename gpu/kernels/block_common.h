#pragma once
// What the weight kernels share with the host: loads from the byte layouts of GGUF blocks, half
// and bfloat16 conversions, the int8 dot product of four bytes, and the activation rows in the
// CPU's Q8x2 format (cpu/quant_ref.h), quantized with the CPU's exact operations. Plain C++
// that nvcc compiles for the device and any compiler for the host, so the tests check every
// piece on the CPU against cpu/quant_ref (tests/unit/gpu/test_block_dot.cpp) and the GPU runs
// the very same code.
#include <math.h>

#include <cstdint>
#include <cstring>

#include "cpu/quant_ref.h"

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define STRATA_HD __host__ __device__ __forceinline__
#else
#define STRATA_HD inline
#endif

namespace strata::gpu::blocks {

// ---- loads: little-endian words from blocks whose fields are only 2-byte aligned ----
STRATA_HD uint32_t load_u32_a2(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
    const auto* h = reinterpret_cast<const uint16_t*>(p);
    return uint32_t(h[0]) | uint32_t(h[1]) << 16;
#else
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
#endif
}
STRATA_HD uint32_t load_u32_a4(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
    return *reinterpret_cast<const uint32_t*>(p);
#else
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
#endif
}
// Four words from 16-byte aligned memory (one 16-byte load on the device).
STRATA_HD void load_u32x4_a16(const uint8_t* p, uint32_t out[4]) {
#if defined(__CUDA_ARCH__)
    const uint4 v = *reinterpret_cast<const uint4*>(p);
    out[0] = v.x, out[1] = v.y, out[2] = v.z, out[3] = v.w;
#else
    std::memcpy(out, p, 16);
#endif
}
STRATA_HD uint16_t load_u16(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
    return *reinterpret_cast<const uint16_t*>(p);
#else
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
#endif
}
STRATA_HD float load_f32(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
    return *reinterpret_cast<const float*>(p);
#else
    float v;
    std::memcpy(&v, p, 4);
    return v;
#endif
}

// ---- conversions ----
STRATA_HD float bits_to_f32(uint32_t u) {
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float f;
    std::memcpy(&f, &u, 4);
    return f;
#endif
}
// IEEE half <-> float (to half: round to nearest even), exact; the host uses cpu/quant_ref's.
STRATA_HD float half_to_f32(uint16_t h) {
#if defined(__CUDA_ARCH__)
    return __half2float(__ushort_as_half(h));
#else
    return cpu::fp16_to_fp32(h);
#endif
}
STRATA_HD uint16_t f32_to_half(float f) {
#if defined(__CUDA_ARCH__)
    return __half_as_ushort(__float2half_rn(f));
#else
    return cpu::fp32_to_fp16(f);
#endif
}
STRATA_HD float bf16_to_f32(uint16_t h) { return bits_to_f32(uint32_t(h) << 16); }
STRATA_HD float half_at(const uint8_t* p) { return half_to_f32(load_u16(p)); }

// ---- integer dot products ----
// Sum of the four signed byte products of a and b, plus c (the dp4a instruction).
STRATA_HD int32_t dp4a(uint32_t a, uint32_t b, int32_t c) {
#if defined(__CUDA_ARCH__)
    return __dp4a(static_cast<int>(a), static_cast<int>(b), c);
#else
    for (int i = 0; i < 4; ++i) c += int32_t(int8_t(a >> 8 * i)) * int32_t(int8_t(b >> 8 * i));
    return c;
#endif
}
// Dot of 8 words of packed int8 values (32 values) with 32 int8 values.
STRATA_HD int32_t dot32(const uint32_t w[8], const uint32_t a[8]) {
    int32_t s = 0;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int i = 0; i < 8; ++i) s = dp4a(w[i], a[i], s);
    return s;
}
// The same over 4 words (16 values): the groups of the 16-value K-quants.
STRATA_HD int32_t dot16(const uint32_t w[4], const uint32_t a[4]) {
    int32_t s = 0;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int i = 0; i < 4; ++i) s = dp4a(w[i], a[i], s);
    return s;
}

// ---- activations: one row in the CPU's Q8x2 layout (cpu::act_q8x2) ----
// hi[n] int8 | lo[n] int8 | dc[nb] f32 | dcs[nb] f32 | s32[nb] int32 | s16[2 nb] int32, each
// value x ~= dc * (256 hi + lo). Rows are act_row_bytes(n) apart (64-byte multiples).
inline constexpr int kActBlock = 32;
STRATA_HD uint64_t act_row_bytes(int64_t n) {
    const uint64_t raw = uint64_t(n) * 2 + uint64_t(n / kActBlock) * 20;
    return (raw + 63) & ~uint64_t{63};
}
// One row read where the block functions need it: a base pointer and the row's width (shared by
// every row of a call), so that a kernel's several rows hold one pointer each, not six.
// Block b of this view is block c0 + b of the row (act_from).
struct ActRow {
    const uint8_t* row;
    int64_t n;
    int64_t c0;
    STRATA_HD int64_t nb() const { return n / kActBlock; }
    // The 32 high (low) int8 values of block b; 16-byte aligned.
    STRATA_HD const uint8_t* hi(int64_t b) const { return row + kActBlock * (c0 + b); }
    STRATA_HD const uint8_t* lo(int64_t b) const { return row + n + kActBlock * (c0 + b); }
    STRATA_HD float dc(int64_t b) const { return reinterpret_cast<const float*>(row + 2 * n)[c0 + b]; }
    STRATA_HD float dcs(int64_t b) const { return reinterpret_cast<const float*>(row + 2 * n)[nb() + c0 + b]; }
    STRATA_HD int32_t s32(int64_t b) const { return reinterpret_cast<const int32_t*>(row + 2 * n)[2 * nb() + c0 + b]; }
    // Half-block sums: i = 2 b + h for half h of block b.
    STRATA_HD int32_t s16(int64_t i) const { return reinterpret_cast<const int32_t*>(row + 2 * n)[3 * nb() + 2 * c0 + i]; }
};
STRATA_HD ActRow act_row(const uint8_t* row, int64_t n) { return {row, n, 0}; }
// The same row from activation block c0 on: its block b is block c0 + b of `a` (a weight tile
// staged out of its row meets it as chunks 0, 1, ...).
STRATA_HD ActRow act_from(const ActRow& a, int64_t c0) { return {a.row, a.n, a.c0 + c0}; }
// The 32 int8 values of a block at p as 8 words.
STRATA_HD void act_words(const uint8_t* p, uint32_t out[8]) {
    load_u32x4_a16(p, out);
    load_u32x4_a16(p + 16, out + 4);
}
// The integer dot of 32 weight values (8 words of int8) with activation block b: the exact
// sum of w * (256 hi + lo); `lo` false for single-level activations (lo all zero).
STRATA_HD int32_t act_dot32(const uint32_t w[8], const ActRow& a, int64_t b, bool lo) {
    uint32_t v[8];
    act_words(a.hi(b), v);
    int32_t s = 256 * dot32(w, v);
    if (lo) {
        act_words(a.lo(b), v);
        s += dot32(w, v);
    }
    return s;
}
// The two 16-value halves separately (groups of 16 with scales of their own).
STRATA_HD void act_dot16x2(const uint32_t w[8], const ActRow& a, int64_t b, bool lo, int32_t out[2]) {
    uint32_t v[8];
    act_words(a.hi(b), v);
    out[0] = 256 * dot16(w, v);
    out[1] = 256 * dot16(w + 4, v + 4);
    if (lo) {
        act_words(a.lo(b), v);
        out[0] += dot16(w, v);
        out[1] += dot16(w + 4, v + 4);
    }
}

// ---- the activation quantizer: cpu::quantize_act_ref's operations, value by value ----
// Blocks whose amax is below this (or NaN) are stored as zeros: 1/d would overflow.
inline constexpr float kTinyAmax = 1e-30f;
struct Q8x2Scale {
    float d = 0, id = 0, id256 = 0;
    bool zero = true;  // the block is stored as zeros
};
STRATA_HD Q8x2Scale q8x2_scale(float amax) {
    Q8x2Scale s;
    if (!(amax >= kTinyAmax)) return s;
    s.zero = false;
    s.d = amax / 127.0f;
    s.id = 1.0f / s.d;
    s.id256 = s.id * 256.0f;
    return s;
}
STRATA_HD float round_even(float x) {
#if defined(__CUDA_ARCH__)
    return rintf(x);
#else
    return __builtin_rintf(x);
#endif
}
// Value x of a block with scale s: its high and low levels (lo = 0 when single-level).
STRATA_HD void q8x2_levels(float x, const Q8x2Scale& s, bool two_level, int8_t& hi, int8_t& lo) {
    if (s.zero) {
        hi = lo = 0;
        return;
    }
#if defined(__CUDA_ARCH__)
    const float h = rintf(__fmul_rn(x, s.id));
    const float r = __fmaf_rn(-s.d, h, x);
    float l = two_level ? rintf(__fmul_rn(r, s.id256)) : 0.0f;
#else
    const float h = round_even(x * s.id);
    const float r = __builtin_fmaf(-s.d, h, x);
    float l = two_level ? round_even(r * s.id256) : 0.0f;
#endif
    l = l < -127.0f ? -127.0f : (l > 127.0f ? 127.0f : l);
    hi = static_cast<int8_t>(h);
    lo = static_cast<int8_t>(l);
}

}  // namespace strata::gpu::blocks
