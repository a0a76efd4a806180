#pragma once
// The block types of 32 values (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL) for the weight kernels,
// host and device alike. Each type gives, for chunk c of a weight row (its values 32c ..
// 32c + 31, which meet activation block c):
//   dot_chunk  adds the chunk's share of the row's dot product with a Q8x2 activation row to
//              `acc`, with exactly cpu::vec_dot_ref's operations for that block (an exact
//              integer dot, then the same float products in the same order);
//   values8    values 8 part .. 8 part + 7 of the chunk as floats, with exactly
//              cpu::dequantize_row_ref's operations.
// The integer dot runs on words of four int8 weight values in order (dp4a); weight offsets
// (-8, -16) are taken out through the block's activation sum instead of from every value.
#include "gpu/kernels/block_common.h"

namespace strata::gpu::blocks {

// ---- 16-entry codebooks (IQ4_NL / IQ4_XS, MXFP4) ----
// The codebook as four little-endian words of int8 entries, so device code holds it in registers
// (the host tests check the words against cpu::kIq4Values and cpu::kMxfp4Values).
struct Codebook {
    uint32_t w[4];
};
STRATA_HD constexpr Codebook iq4_codebook() { return {{0xBFAD9881u, 0xF6EADDCFu, 0x26190D01u, 0x71594535u}}; }
// MXFP4's e2m1 values doubled (as ggml stores them; the block's scale is halved to match).
STRATA_HD constexpr Codebook mxfp4_codebook() { return {{0x03020100u, 0x0C080604u, 0xFDFEFF00u, 0xF4F8FAFCu}}; }

// Four codebook indices (0..15, one per byte) -> their four int8 entries.
STRATA_HD uint32_t lookup4(Codebook cb, uint32_t idx) {
#if defined(__CUDA_ARCH__)
    // Two byte permutes pick each index's entry among 0-7 and 8-15; bit 3 chooses.
    const uint32_t y = idx & 0x07070707u, z = y | (y >> 4);
    const uint32_t sel = (z & 0xFFu) | ((z >> 8) & 0xFF00u);
    const uint32_t v0 = __byte_perm(cb.w[0], cb.w[1], sel);
    const uint32_t v1 = __byte_perm(cb.w[2], cb.w[3], sel);
    const uint32_t mask = ((idx >> 3) & 0x01010101u) * 0xFFu;
    return (v1 & mask) | (v0 & ~mask);
#else
    uint32_t out = 0;
    for (int i = 0; i < 4; ++i) {
        const uint32_t q = (idx >> 8 * i) & 0xF;
        out |= ((cb.w[q / 4] >> 8 * (q % 4)) & 0xFFu) << 8 * i;
    }
    return out;
#endif
}
STRATA_HD int codebook_value(Codebook cb, int idx) { return int8_t(lookup4(cb, uint32_t(idx)) & 0xFFu); }
STRATA_HD uint32_t iq4_lookup4(uint32_t idx) { return lookup4(iq4_codebook(), idx); }
STRATA_HD int iq4_value(int idx) { return codebook_value(iq4_codebook(), idx); }

// The fifth bits of four consecutive values (bits 0-3 of t) moved to bit 4 of each byte.
STRATA_HD uint32_t spread_bit4(uint32_t t) {
    return ((t & 1u) << 4) | ((t & 2u) << 11) | ((t & 4u) << 18) | ((t & 8u) << 25);
}

// Nibble blocks: byte j holds value j (low nibble) and value j + 16 (high nibble).
STRATA_HD void nibble_words(const uint32_t q[4], uint32_t w[8]) {
    for (int k = 0; k < 4; ++k) {
        w[k] = q[k] & 0x0F0F0F0Fu;
        w[4 + k] = (q[k] >> 4) & 0x0F0F0F0Fu;
    }
}
// Value i (0..31) of a nibble block whose 16 bytes start at qs.
STRATA_HD int nibble_at(const uint8_t* qs, int i) { return i < 16 ? qs[i] & 0xF : qs[i - 16] >> 4; }

struct BlockQ4_0 {  // 18 bytes: d, qs[16]; x = d * (q - 8)
    static constexpr int kValues = 32, kBytes = 18;
    template <int kCols>
    STRATA_HD static void dot_chunk(const uint8_t* row, int64_t c, const ActRow* act, bool lo, float* acc) {
        const uint8_t* b = row + kBytes * c;
        uint32_t q[4], w[8];
        for (int k = 0; k < 4; ++k) q[k] = load_u32_a2(b + 2 + 4 * k);
        nibble_words(q, w);
        const float d = half_at(b);
        for (int t = 0; t < kCols; ++t) {
            const ActRow& a = act[t];
            const int32_t dot = act_dot32(w, a, c, lo) - 8 * a.s32(c);
            acc[t] += d * a.dc(c) * float(dot);
        }
    }
    STRATA_HD static void values8(const uint8_t* row, int64_t c, int part, float out[8]) {
        const uint8_t* b = row + kBytes * c;
        const float d = half_at(b);
        for (int t = 0; t < 8; ++t) out[t] = d * float(nibble_at(b + 2, 8 * part + t) - 8);
    }
};

struct BlockQ4_1 {  // 20 bytes: d, m, qs[16]; x = d * q + m
    static constexpr int kValues = 32, kBytes = 20;
    template <int kCols>
    STRATA_HD static void dot_chunk(const uint8_t* row, int64_t c, const ActRow* act, bool lo, float* acc) {
        const uint8_t* b = row + kBytes * c;
        uint32_t q[4], w[8];
        for (int k = 0; k < 4; ++k) q[k] = load_u32_a4(b + 4 + 4 * k);
        nibble_words(q, w);
        const float d = half_at(b), m = half_at(b + 2);
        for (int t = 0; t < kCols; ++t) {
            const ActRow& a = act[t];
            acc[t] += d * a.dc(c) * float(act_dot32(w, a, c, lo));
            acc[t] += m * a.dcs(c);
        }
    }
    STRATA_HD static void values8(const uint8_t* row, int64_t c, int part, float out[8]) {
        const uint8_t* b = row + kBytes * c;
        const float d = half_at(b), m = half_at(b + 2);
        for (int t = 0; t < 8; ++t) out[t] = d * float(nibble_at(b + 4, 8 * part + t)) + m;
    }
};

// Q5: bit j of the little-endian 32-bit qh is the fifth bit of value j.
template <int kBytesT, int kQh, int kQs, bool kMin>
struct BlockQ5 {
    static constexpr int kValues = 32, kBytes = kBytesT;
    STRATA_HD static void words(const uint8_t* b, uint32_t w[8]) {
        uint32_t q[4];
        for (int k = 0; k < 4; ++k) q[k] = load_u32_a2(b + kQs + 4 * k);
        nibble_words(q, w);
        const uint32_t qh = load_u32_a2(b + kQh);
        for (int k = 0; k < 4; ++k) {
            w[k] |= spread_bit4((qh >> 4 * k) & 0xF);
            w[4 + k] |= spread_bit4((qh >> (16 + 4 * k)) & 0xF);
        }
    }
    template <int kCols>
    STRATA_HD static void dot_chunk(const uint8_t* row, int64_t c, const ActRow* act, bool lo, float* acc) {
        const uint8_t* b = row + kBytes * c;
        uint32_t w[8];
        words(b, w);
        const float d = half_at(b), m = kMin ? half_at(b + 2) : 0.0f;
        for (int t = 0; t < kCols; ++t) {
            const ActRow& a = act[t];
            const int32_t dot = act_dot32(w, a, c, lo) - (kMin ? 0 : 16 * a.s32(c));
            acc[t] += d * a.dc(c) * float(dot);
            if (kMin) acc[t] += m * a.dcs(c);
        }
    }
    STRATA_HD static void values8(const uint8_t* row, int64_t c, int part, float out[8]) {
        const uint8_t* b = row + kBytes * c;
        const float d = half_at(b);
        const uint32_t qh = load_u32_a2(b + kQh);
        for (int t = 0; t < 8; ++t) {
            const int i = 8 * part + t;
            const int v = nibble_at(b + kQs, i) | int((qh >> i) & 1) << 4;
            if (kMin)
                out[t] = d * float(v) + half_at(b + 2);
            else
                out[t] = d * float(v - 16);
        }
    }
};
using BlockQ5_0 = BlockQ5<22, 2, 6, false>;  // d, qh[4], qs[16]; x = d * (q - 16)
using BlockQ5_1 = BlockQ5<24, 4, 8, true>;   // d, m, qh[4], qs[16]; x = d * q + m

struct BlockQ8_0 {  // 34 bytes: d, qs[32] int8; x = d * q
    static constexpr int kValues = 32, kBytes = 34;
    template <int kCols>
    STRATA_HD static void dot_chunk(const uint8_t* row, int64_t c, const ActRow* act, bool lo, float* acc) {
        const uint8_t* b = row + kBytes * c;
        uint32_t w[8];
        for (int k = 0; k < 8; ++k) w[k] = load_u32_a2(b + 2 + 4 * k);
        const float d = half_at(b);
        for (int t = 0; t < kCols; ++t) acc[t] += d * act[t].dc(c) * float(act_dot32(w, act[t], c, lo));
    }
    STRATA_HD static void values8(const uint8_t* row, int64_t c, int part, float out[8]) {
        const uint8_t* b = row + kBytes * c;
        const float d = half_at(b);
        for (int t = 0; t < 8; ++t) out[t] = d * float(int8_t(b[2 + 8 * part + t]));
    }
};

struct BlockIQ4_NL {  // 18 bytes: d, qs[16] codebook indices; x = d * codebook[q]
    static constexpr int kValues = 32, kBytes = 18;
    template <int kCols>
    STRATA_HD static void dot_chunk(const uint8_t* row, int64_t c, const ActRow* act, bool lo, float* acc) {
        const uint8_t* b = row + kBytes * c;
        uint32_t q[4], w[8];
        for (int k = 0; k < 4; ++k) q[k] = load_u32_a2(b + 2 + 4 * k);
        nibble_words(q, w);
        for (int k = 0; k < 8; ++k) w[k] = iq4_lookup4(w[k]);
        const float d = half_at(b);
        for (int t = 0; t < kCols; ++t) acc[t] += d * act[t].dc(c) * float(act_dot32(w, act[t], c, lo));
    }
    STRATA_HD static void values8(const uint8_t* row, int64_t c, int part, float out[8]) {
        const uint8_t* b = row + kBytes * c;
        const float d = half_at(b);
        for (int t = 0; t < 8; ++t) out[t] = d * float(iq4_value(nibble_at(b + 2, 8 * part + t)));
    }
};

// MXFP4, 17 bytes: e (an e8m0 exponent), qs[16] codebook indices laid out as IQ4_NL's;
// x = 2^(e - 128) * doubled e2m1 value. Blocks are byte-aligned: their bytes are read one by one.
STRATA_HD float e8m0_half(uint8_t e) { return bits_to_f32(e < 2 ? 0x00200000u << e : uint32_t(e - 1) << 23); }
struct BlockMXFP4 {
    static constexpr int kValues = 32, kBytes = 17;
    template <int kCols>
    STRATA_HD static void dot_chunk(const uint8_t* row, int64_t c, const ActRow* act, bool lo, float* acc) {
        const uint8_t* b = row + kBytes * c;
        uint32_t q[4], w[8];
        for (int k = 0; k < 4; ++k)
            q[k] = uint32_t(b[1 + 4 * k]) | uint32_t(b[2 + 4 * k]) << 8 | uint32_t(b[3 + 4 * k]) << 16 | uint32_t(b[4 + 4 * k]) << 24;
        nibble_words(q, w);
        for (int k = 0; k < 8; ++k) w[k] = lookup4(mxfp4_codebook(), w[k]);
        const float d = e8m0_half(b[0]);
        for (int t = 0; t < kCols; ++t) acc[t] += d * act[t].dc(c) * float(act_dot32(w, act[t], c, lo));
    }
    STRATA_HD static void values8(const uint8_t* row, int64_t c, int part, float out[8]) {
        const uint8_t* b = row + kBytes * c;
        const float d = e8m0_half(b[0]);
        for (int t = 0; t < 8; ++t) out[t] = d * float(codebook_value(mxfp4_codebook(), nibble_at(b + 1, 8 * part + t)));
    }
};

}  // namespace strata::gpu::blocks
