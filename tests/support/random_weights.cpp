#include "tests/support/random_weights.h"

#include <cmath>
#include <cstring>

#include "cpu/quant_ref.h"

namespace strata::test {

std::vector<uint8_t> random_weights(DType type, int64_t n_rows, int64_t n_cols, std::mt19937& rng) {
    std::vector<uint8_t> m(row_bytes(type, n_cols) * n_rows);
    std::normal_distribution<float> normal;
    std::uniform_real_distribution<float> expo(-3.0f, 0.0f);
    auto scale = [&] { return std::pow(10.0f, expo(rng)) * (rng() & 1 ? 1.0f : -1.0f); };
    if (traits(type).block_elems == 1) {
        for (int64_t i = 0; i < n_rows * n_cols; ++i) {
            const float x = normal(rng);
            if (type == DType::F32) std::memcpy(m.data() + 4 * i, &x, 4);
            const uint16_t h = type == DType::F16 ? cpu::fp32_to_fp16(x) : cpu::fp32_to_bf16(x);
            if (type != DType::F32) std::memcpy(m.data() + 2 * i, &h, 2);
        }
        return m;
    }
    for (auto& b : m) b = static_cast<uint8_t>(rng());
    const cpu::F16ScaleFields fields = cpu::f16_scale_fields(type);
    const size_t bb = traits(type).block_bytes;
    for (size_t blk = 0; blk < m.size() / bb; ++blk) {
        for (int f = 0; f < fields.n; ++f) {
            const cpu::f16_bits h = cpu::fp32_to_fp16(scale());
            std::memcpy(m.data() + blk * bb + fields.at[f], &h, 2);
        }
        if (type == DType::Q8_K) {  // a float scale
            const float d = scale();
            std::memcpy(m.data() + blk * bb, &d, 4);
        }
        if (type == DType::MXFP4)  // an e8m0 exponent byte: scales 2^-10 .. 2^0
            m[blk * bb] = static_cast<uint8_t>(118 + rng() % 11);
    }
    return m;
}

}  // namespace strata::test
