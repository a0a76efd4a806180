#pragma once
// The KV cache's element types for the attention kernels, host and device alike (cpu/kv_format.h
// defines the formats): rows of F32, F16 or BF16 values, or of Q8_0 / Q4_0 blocks (32 values
// and an f16 scale). Reading: eight values at once from a position that is a multiple of 8
// (with 16-byte loads where the type allows), or one. Writing: a block of 32 quantized with
// cpu::store_kv_row's exact operations, one value at a time, so the device kernels (which
// share these functions, with the block's maximum found by the warp) write the CPU's bytes.
#include "gpu/kernels/block_common.h"

// Host compilers must not fuse a multiply and an add where the CPU's code does not.
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)
#define STRATA_NO_CONTRACT __attribute__((optimize("fp-contract=off")))
#else
#define STRATA_NO_CONTRACT
#endif

namespace strata::gpu::blocks {

enum class KvKind : uint8_t { F32, F16, BF16, Q8_0, Q4_0 };

template <KvKind kKind>
struct KvElem;

template <>
struct KvElem<KvKind::F32> {
    STRATA_HD static float one(const uint8_t* row, int64_t i) { return load_f32(row + 4 * i); }
    STRATA_HD static void eight(const uint8_t* row, int64_t i, float out[8]) {
        uint32_t u[4];
        load_u32x4_a16(row + 4 * i, u);
        for (int k = 0; k < 4; ++k) out[k] = bits_to_f32(u[k]);
        load_u32x4_a16(row + 4 * i + 16, u);
        for (int k = 0; k < 4; ++k) out[4 + k] = bits_to_f32(u[k]);
    }
};
template <bool kBf16>
struct KvElem16 {
    STRATA_HD static float conv(uint16_t h) { return kBf16 ? bf16_to_f32(h) : half_to_f32(h); }
    STRATA_HD static float one(const uint8_t* row, int64_t i) { return conv(load_u16(row + 2 * i)); }
    STRATA_HD static void eight(const uint8_t* row, int64_t i, float out[8]) {
        uint32_t u[4];
        load_u32x4_a16(row + 2 * i, u);
        for (int k = 0; k < 4; ++k) {
            out[2 * k] = conv(u[k] & 0xFFFF);
            out[2 * k + 1] = conv(u[k] >> 16);
        }
    }
};
template <>
struct KvElem<KvKind::F16> : KvElem16<false> {};
template <>
struct KvElem<KvKind::BF16> : KvElem16<true> {};

template <>
struct KvElem<KvKind::Q8_0> {  // blocks of 34 bytes: d, qs[32]
    STRATA_HD static float one(const uint8_t* row, int64_t i) {
        const uint8_t* b = row + 34 * (i / 32);
        return half_at(b) * float(int8_t(b[2 + i % 32]));
    }
    STRATA_HD static void eight(const uint8_t* row, int64_t i, float out[8]) {
        const uint8_t* b = row + 34 * (i / 32);
        const float d = half_at(b);
        const uint32_t w0 = load_u32_a2(b + 2 + i % 32), w1 = load_u32_a2(b + 6 + i % 32);
        for (int k = 0; k < 4; ++k) {
            out[k] = d * float(int8_t(w0 >> 8 * k));
            out[4 + k] = d * float(int8_t(w1 >> 8 * k));
        }
    }
};
template <>
struct KvElem<KvKind::Q4_0> {  // blocks of 18 bytes: d, qs[16]; value j low nibble, j + 16 high
    STRATA_HD static float one(const uint8_t* row, int64_t i) {
        const uint8_t* b = row + 18 * (i / 32);
        const int j = static_cast<int>(i % 32);
        const int q = j < 16 ? b[2 + j] & 0xF : b[2 + j - 16] >> 4;
        return half_at(b) * float(q - 8);
    }
    STRATA_HD static void eight(const uint8_t* row, int64_t i, float out[8]) {
        const uint8_t* b = row + 18 * (i / 32);
        const int j = static_cast<int>(i % 32), shift = j < 16 ? 0 : 4, at = j % 16;
        const float d = half_at(b);
        const uint32_t w0 = load_u32_a2(b + 2 + at), w1 = load_u32_a2(b + 6 + at);
        for (int k = 0; k < 4; ++k) {
            out[k] = d * float(int((w0 >> (8 * k + shift)) & 0xF) - 8);
            out[4 + k] = d * float(int((w1 >> (8 * k + shift)) & 0xF) - 8);
        }
    }
};

// ---- writing quantized rows (cpu::store_kv_row) ----
// Q8_0: d = amax / 127 (stored as f16), q = round(x / d) half away from zero.
struct KvQ8_0Scale {
    uint16_t d_bits;
    float id;
};
STRATA_HD KvQ8_0Scale kv_q8_0_scale(float amax) {
    const float d = amax / 127;
    return {f32_to_half(d), d != 0 ? 1 / d : 0};
}
STRATA_HD int8_t kv_q8_0_level(float x, float id) {
#if defined(__CUDA_ARCH__)
    return static_cast<int8_t>(roundf(__fmul_rn(x, id)));
#else
    return static_cast<int8_t>(__builtin_roundf(x * id));
#endif
}
// Q4_0 (ggml's quantize_row_q4_0_ref): the value of largest magnitude (the first of equals)
// maps to -8: d = max / -8, q = min(15, trunc(x / d + 8.5)), a multiply and then an add (never
// one fused multiply-add, as cpu/kv_format.cpp is built).
struct KvQ4_0Scale {
    uint16_t d_bits;
    float id;
};
STRATA_HD KvQ4_0Scale kv_q4_0_scale(float max) {
    const float d = max / -8;
    return {f32_to_half(d), d != 0 ? 1 / d : 0};
}
STRATA_HD STRATA_NO_CONTRACT uint8_t kv_q4_0_level(float x, float id) {
#if defined(__CUDA_ARCH__)
    const int q = static_cast<int>(static_cast<int8_t>(__fadd_rn(__fmul_rn(x, id), 8.5f)));
#else
    const int q = static_cast<int>(static_cast<int8_t>(x * id + 8.5f));
#endif
    return static_cast<uint8_t>(q < 15 ? q : 15);
}

// Block b (32 values of x) of a quantized row, serially: the host's twin of the kv_store kernel.
STRATA_HD void store_kv_block_q8_0(const float* x, uint8_t* row, int64_t b) {
    const float* xb = x + 32 * b;
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = fmaxf(amax, fabsf(xb[j]));
    const KvQ8_0Scale s = kv_q8_0_scale(amax);
    uint8_t* blk = row + 34 * b;
    blk[0] = uint8_t(s.d_bits), blk[1] = uint8_t(s.d_bits >> 8);
    for (int j = 0; j < 32; ++j) blk[2 + j] = static_cast<uint8_t>(kv_q8_0_level(xb[j], s.id));
}
STRATA_HD void store_kv_block_q4_0(const float* x, uint8_t* row, int64_t b) {
    const float* xb = x + 32 * b;
    float amax = 0, max = 0;
    for (int j = 0; j < 32; ++j)
        if (amax < fabsf(xb[j])) amax = fabsf(xb[j]), max = xb[j];
    const KvQ4_0Scale s = kv_q4_0_scale(max);
    uint8_t* blk = row + 18 * b;
    blk[0] = uint8_t(s.d_bits), blk[1] = uint8_t(s.d_bits >> 8);
    for (int j = 0; j < 16; ++j)
        blk[2 + j] = static_cast<uint8_t>(kv_q4_0_level(xb[j], s.id) | kv_q4_0_level(xb[j + 16], s.id) << 4);
}

}  // namespace strata::gpu::blocks
