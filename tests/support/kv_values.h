#pragma once
// KV cache rows decoded from their bytes by the formats' definitions (IEEE half, bfloat16 as
// float's upper half, ggml's Q8_0 block: f16 scale then 32 int8, Q4_0: f16 scale then 16 bytes
// of nibbles, value j in the low nibble of byte j and value j + 16 in its high), written apart from the
// engine's converters so that tests check those against something independent.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/dtype.h"

namespace strata::test {

// The value of IEEE binary16 bits (finite values only).
inline double half_value(uint16_t h) {
    const int e = (h >> 10) & 31, m = h & 1023;
    const double v = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -v : v;
}

// The value of bfloat16 bits (finite values only): 8 exponent bits, 7 mantissa bits.
inline double bf16_value(uint16_t h) {
    const int e = (h >> 7) & 255, m = h & 127;
    const double v = e == 0 ? std::ldexp(m, -133) : std::ldexp(128 + m, e - 134);
    return (h & 0x8000) ? -v : v;
}

// Value i of a KV row of `type` (F32, F16, BF16, Q8_0 or Q4_0).
inline double kv_value(DType type, const void* row, int64_t i) {
    const auto* p = static_cast<const uint8_t*>(row);
    uint16_t h;
    switch (type) {
        case DType::F32: {
            float f;
            std::memcpy(&f, p + 4 * i, 4);
            return f;
        }
        case DType::F16: std::memcpy(&h, p + 2 * i, 2); return half_value(h);
        case DType::BF16: std::memcpy(&h, p + 2 * i, 2); return bf16_value(h);
        case DType::Q8_0: {
            const uint8_t* block = p + (i / 32) * 34;  // 2-byte scale, then 32 int8
            std::memcpy(&h, block, 2);
            return half_value(h) * static_cast<int8_t>(block[2 + i % 32]);
        }
        case DType::Q4_0: {
            const uint8_t* block = p + (i / 32) * 18;  // 2-byte scale, then 16 bytes of nibbles
            std::memcpy(&h, block, 2);
            const int j = static_cast<int>(i % 32);
            const int q = j < 16 ? block[2 + j] & 15 : block[2 + j - 16] >> 4;
            return half_value(h) * (q - 8);
        }
        default: return NAN;
    }
}

}  // namespace strata::test
