#pragma once
// Random weights of a GGUF type for the device tests, and their scalar-reference dequantization.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "cpu/quant_ref.h"

namespace strata::gpu::test {

inline void put_half(uint8_t* p, float f) {
    const cpu::f16_bits h = cpu::fp32_to_fp16(f);
    std::memcpy(p, &h, 2);
}

// n_rows random rows of `type`: random quant bytes, with every f16 scale set to a sane value
// (random bits would give infinities and NaNs).
inline std::vector<uint8_t> random_weights(DType type, int64_t n_rows, int64_t n_cols, uint32_t seed) {
    const size_t rb = row_bytes(type, n_cols);
    std::vector<uint8_t> w(rb * n_rows);
    std::mt19937 rng(seed);
    for (auto& b : w) b = static_cast<uint8_t>(rng());
    std::uniform_real_distribution<float> scale(0.002f, 0.02f), sym(-0.05f, 0.05f);
    const auto& t = traits(type);
    for (size_t blk = 0; blk < w.size() / t.block_bytes; ++blk) {
        uint8_t* b = w.data() + blk * t.block_bytes;
        switch (type) {
            case DType::F16: put_half(b, sym(rng) * 20.0f); break;
            case DType::Q4_0: case DType::Q8_0: put_half(b, scale(rng)); break;
            case DType::Q4_1: put_half(b, scale(rng)); put_half(b + 2, sym(rng)); break;
            case DType::Q4_K: put_half(b, scale(rng)); put_half(b + 2, scale(rng)); break;
            case DType::Q6_K: put_half(b + 208, scale(rng)); break;
            default: FAIL("no generator for this type");
        }
    }
    return w;
}

inline std::vector<float> dequantize_ref(DType type, const std::vector<uint8_t>& w, int64_t n_rows, int64_t n_cols) {
    std::vector<float> out(n_rows * n_cols);
    for (int64_t r = 0; r < n_rows; ++r)
        cpu::dequantize_row_ref(type, w.data() + r * row_bytes(type, n_cols), out.data() + r * n_cols, n_cols);
    return out;
}

}  // namespace strata::gpu::test
