#pragma once
// The super-block types of 256 values (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, IQ4_XS) for the
// weight kernels, host and device alike, with the interface of block_dot_32.h: chunk c is
// sub-block j = c % 8 of super-block c / 8 (32 values, activation block c). Types with groups
// of 16 values (Q2_K, Q3_K, Q6_K) add each group's term in turn, as cpu::vec_dot_ref does.
#include "gpu/kernels/block_dot_32.h"

namespace strata::gpu::blocks {

// Q4_K / Q5_K: the 6-bit scale and min of sub-block j (0..7) from the packed 12 bytes.
STRATA_HD void k4_scale_min(int j, const uint8_t* q, int& sc, int& m) {
    if (j < 4) {
        sc = q[j] & 63;
        m = q[j + 4] & 63;
    } else {
        sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

// Q4_K, 144 bytes: d, dmin, scales[12], qs[128]; each 64 values share 32 bytes of qs, low
// nibbles sub-block 2k, high nibbles 2k + 1. Q5_K, 176 bytes: d, dmin, scales[12], qh[32],
// qs[128]; bit j of qh[l] is the fifth bit of value l of sub-block j. x = d sc q - dmin m.
template <bool kFive>
struct BlockQ45_K {
    static constexpr int kValues = 256, kBytes = kFive ? 176 : 144, kQs = kFive ? 48 : 16;
    STRATA_HD static void words(const uint8_t* b, int j, uint32_t w[8]) {
        uint32_t q[8];
        load_u32x4_a16(b + kQs + 32 * (j / 2), q);
        load_u32x4_a16(b + kQs + 32 * (j / 2) + 16, q + 4);
        for (int k = 0; k < 8; ++k) w[k] = ((j & 1) ? q[k] >> 4 : q[k]) & 0x0F0F0F0Fu;
        if (kFive) {
            uint32_t h[8];
            load_u32x4_a16(b + 16, h);
            load_u32x4_a16(b + 32, h + 4);
            for (int k = 0; k < 8; ++k) w[k] |= ((h[k] >> j) & 0x01010101u) << 4;
        }
    }
    template <int kCols>
    STRATA_HD static void dot_chunk(const uint8_t* row, int64_t c, const ActRow* act, bool lo, float* acc) {
        const uint8_t* b = row + kBytes * (c / 8);
        const int j = static_cast<int>(c % 8);
        uint32_t w[8];
        words(b, j, w);
        int sc, m;
        k4_scale_min(j, b + 4, sc, m);
        const float d = half_at(b), dmin = half_at(b + 2);
        for (int t = 0; t < kCols; ++t) {
            const ActRow& a = act[t];
            acc[t] += d * float(sc) * a.dc(c) * float(act_dot32(w, a, c, lo));
            acc[t] += -(dmin * float(m)) * a.dcs(c);
        }
    }
    STRATA_HD static void values8(const uint8_t* row, int64_t c, int part, float out[8]) {
        const uint8_t* b = row + kBytes * (c / 8);
        const int j = static_cast<int>(c % 8);
        int sc, m;
        k4_scale_min(j, b + 4, sc, m);
        const float d0 = half_at(b) * float(sc), dm0 = half_at(b + 2) * float(m);
        const uint8_t* q = b + kQs + 32 * (j / 2);
        for (int t = 0; t < 8; ++t) {
            const int l = 8 * part + t;
            int v = (j & 1) ? q[l] >> 4 : q[l] & 0xF;
            if (kFive) v |= ((b[16 + l] >> j) & 1) << 4;
            out[t] = d0 * float(v) - dm0;
        }
    }
};
using BlockQ4_K = BlockQ45_K<false>;
using BlockQ5_K = BlockQ45_K<true>;

// Q6_K, 210 bytes: ql[128], qh[64], scales[16] int8, d. Value k: half h = k/128, r = k%128,
// quarter s = r/32, l = r%32; low 4 bits from ql[64h + l + 32(s&1)] (nibble s>>1), high 2 bits
// from qh[32h + l] >> 2s; minus 32. Sub-block jj is quarter jj % 4 of half jj / 4.
struct BlockQ6_K {
    static constexpr int kValues = 256, kBytes = 210;
    STRATA_HD static void words(const uint8_t* b, int jj, uint32_t w[8]) {
        const int h = jj / 4, s = jj % 4;
        const uint8_t* ql = b + 64 * h + 32 * (s & 1);
        const uint8_t* qh = b + 128 + 32 * h;
        for (int k = 0; k < 8; ++k) {
            const uint32_t l4 = ((s >> 1) ? load_u32_a2(ql + 4 * k) >> 4 : load_u32_a2(ql + 4 * k)) & 0x0F0F0F0Fu;
            w[k] = l4 | ((load_u32_a2(qh + 4 * k) >> (2 * s)) & 0x03030303u) << 4;
        }
    }
    template <int kCols>
    STRATA_HD static void dot_chunk(const uint8_t* row, int64_t c, const ActRow* act, bool lo, float* acc) {
        const uint8_t* b = row + kBytes * (c / 8);
        const int jj = static_cast<int>(c % 8);
        uint32_t w[8];
        words(b, jj, w);
        const float d = half_at(b + 208);
        for (int t = 0; t < kCols; ++t) {
            const ActRow& a = act[t];
            int32_t dots[2];
            act_dot16x2(w, a, c, lo, dots);
            for (int i = 0; i < 2; ++i) {
                const int32_t dot = dots[i] - 32 * a.s16(2 * c + i);
                acc[t] += d * float(int8_t(b[192 + 2 * jj + i])) * a.dc(c) * float(dot);
            }
        }
    }
    STRATA_HD static void values8(const uint8_t* row, int64_t c, int part, float out[8]) {
        const uint8_t* b = row + kBytes * (c / 8);
        const int jj = static_cast<int>(c % 8), h = jj / 4, s = jj % 4;
        const float d = half_at(b + 208);
        const float sc = float(int8_t(b[192 + 2 * jj + part / 2]));
        for (int t = 0; t < 8; ++t) {
            const int l = 8 * part + t;
            const uint8_t ql = b[64 * h + l + 32 * (s & 1)];
            const int v = ((s >> 1) ? ql >> 4 : ql & 0xF) | ((b[128 + 32 * h + l] >> (2 * s)) & 3) << 4;
            out[t] = d * sc * float(v - 32);
        }
    }
};

// Q8_K (as weights), 292 bytes: d (f32), qs[256] int8, bsums[16]; x = d * q.
struct BlockQ8_K {
    static constexpr int kValues = 256, kBytes = 292;
    template <int kCols>
    STRATA_HD static void dot_chunk(const uint8_t* row, int64_t c, const ActRow* act, bool lo, float* acc) {
        const uint8_t* b = row + kBytes * (c / 8);
        const uint8_t* qs = b + 4 + 32 * (c % 8);
        uint32_t w[8];
        for (int k = 0; k < 8; ++k) w[k] = load_u32_a4(qs + 4 * k);
        const float d = load_f32(b);
        for (int t = 0; t < kCols; ++t) acc[t] += d * act[t].dc(c) * float(act_dot32(w, act[t], c, lo));
    }
    STRATA_HD static void values8(const uint8_t* row, int64_t c, int part, float out[8]) {
        const uint8_t* b = row + kBytes * (c / 8);
        const float d = load_f32(b);
        for (int t = 0; t < 8; ++t) out[t] = d * float(int8_t(b[4 + 32 * (c % 8) + 8 * part + t]));
    }
};

// Q2_K, 84 bytes: scales[16] (scale | min << 4 per group of 16), qs[64], d, dmin. Value k:
// half n = k/128, bit pair j = (k%128)/32 of byte qs[32n + k%32]. x = d sc q - dmin m.
// Q3_K, 110 bytes: hmask[32], qs[64], scales[12] (6-bit, stored + 32), d; the third bit of
// value k is bit 4n + j of hmask[k%32]; x = d sc (q - 4).
template <bool kThree>
struct BlockQ23_K {
    static constexpr int kValues = 256, kBytes = kThree ? 110 : 84, kQs = kThree ? 32 : 16;
    STRATA_HD static void words(const uint8_t* b, int jj, uint32_t w[8]) {
        const int n = jj / 4, j = jj % 4;
        for (int k = 0; k < 8; ++k) {
            w[k] = (load_u32_a2(b + kQs + 32 * n + 4 * k) >> (2 * j)) & 0x03030303u;
            if (kThree) w[k] |= ((load_u32_a2(b + 4 * k) >> (4 * n + j)) & 0x01010101u) << 2;
        }
    }
    // Group g (0..15): Q3_K's signed scale, Q2_K's 4-bit scale.
    STRATA_HD static int scale(const uint8_t* b, int g) {
        if (!kThree) return b[g] & 0xF;
        const uint8_t* sc = b + 96;
        const int lo = g < 8 ? sc[g] & 0xF : sc[g - 8] >> 4;
        const int hi = (sc[8 + g % 4] >> (2 * (g / 4))) & 3;
        return (lo | hi << 4) - 32;
    }
    STRATA_HD static float d_of(const uint8_t* b) { return half_at(b + (kThree ? 108 : 80)); }
    template <int kCols>
    STRATA_HD static void dot_chunk(const uint8_t* row, int64_t c, const ActRow* act, bool lo, float* acc) {
        const uint8_t* b = row + kBytes * (c / 8);
        const int jj = static_cast<int>(c % 8);
        uint32_t w[8];
        words(b, jj, w);
        const float d = d_of(b), dmin = kThree ? 0.0f : half_at(b + 82);
        for (int t = 0; t < kCols; ++t) {
            const ActRow& a = act[t];
            int32_t dots[2];
            act_dot16x2(w, a, c, lo, dots);
            for (int i = 0; i < 2; ++i) {
                const int g = 2 * jj + i;
                if (kThree) {
                    acc[t] += d * float(scale(b, g)) * a.dc(c) * float(dots[i] - 4 * a.s16(2 * c + i));
                } else {
                    acc[t] += d * float(scale(b, g)) * a.dc(c) * float(dots[i]);
                    acc[t] += -(dmin * float(b[g] >> 4)) * (a.dc(c) * float(a.s16(2 * c + i)));
                }
            }
        }
    }
    STRATA_HD static void values8(const uint8_t* row, int64_t c, int part, float out[8]) {
        const uint8_t* b = row + kBytes * (c / 8);
        const int jj = static_cast<int>(c % 8), n = jj / 4, j = jj % 4, g = 2 * jj + part / 2;
        const float dl = d_of(b) * float(scale(b, g));
        const float ml = kThree ? 0.0f : half_at(b + 82) * float(b[g] >> 4);
        for (int t = 0; t < 8; ++t) {
            const int l = 8 * part + t;
            int q = (b[kQs + 32 * n + l] >> (2 * j)) & 3;
            if (kThree) {
                q |= ((b[l] >> (4 * n + j)) & 1) << 2;
                out[t] = dl * float(q - 4);
            } else {
                out[t] = dl * float(q) - ml;
            }
        }
    }
};
using BlockQ2_K = BlockQ23_K<false>;
using BlockQ3_K = BlockQ23_K<true>;

// IQ4_XS, 136 bytes: d, scales_h (u16), scales_l[4], qs[128]; sub-block ib has the 6-bit scale
// ls (4 bits in scales_l, 2 in scales_h, stored + 32) and 16 bytes of codebook indices.
struct BlockIQ4_XS {
    static constexpr int kValues = 256, kBytes = 136;
    STRATA_HD static int scale(const uint8_t* b, int ib) {
        const int lo = (b[4 + ib / 2] >> (4 * (ib % 2))) & 0xF;
        const int hi = (load_u16(b + 2) >> (2 * ib)) & 3;
        return (lo | hi << 4) - 32;
    }
    template <int kCols>
    STRATA_HD static void dot_chunk(const uint8_t* row, int64_t c, const ActRow* act, bool lo, float* acc) {
        const uint8_t* b = row + kBytes * (c / 8);
        const int ib = static_cast<int>(c % 8);
        uint32_t q[4], w[8];
        for (int k = 0; k < 4; ++k) q[k] = load_u32_a4(b + 8 + 16 * ib + 4 * k);
        nibble_words(q, w);
        for (int k = 0; k < 8; ++k) w[k] = iq4_lookup4(w[k]);
        const float d = half_at(b), sc = float(scale(b, ib));
        for (int t = 0; t < kCols; ++t) acc[t] += d * sc * act[t].dc(c) * float(act_dot32(w, act[t], c, lo));
    }
    STRATA_HD static void values8(const uint8_t* row, int64_t c, int part, float out[8]) {
        const uint8_t* b = row + kBytes * (c / 8);
        const int ib = static_cast<int>(c % 8);
        const float dl = half_at(b) * float(scale(b, ib));
        for (int t = 0; t < 8; ++t) out[t] = dl * float(iq4_value(nibble_at(b + 8 + 16 * ib, 8 * part + t)));
    }
};

}  // namespace strata::gpu::blocks
