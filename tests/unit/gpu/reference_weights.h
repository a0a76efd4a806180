#pragma once
// The scalar reference's dequantization of a weight matrix, for the device tests.
#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "cpu/quant_ref.h"

namespace strata::gpu::test {

inline std::vector<float> dequantize_ref(DType type, const std::vector<uint8_t>& w, int64_t n_rows, int64_t n_cols) {
    std::vector<float> out(n_rows * n_cols);
    for (int64_t r = 0; r < n_rows; ++r)
        cpu::dequantize_row_ref(type, w.data() + r * row_bytes(type, n_cols), out.data() + r * n_cols, n_cols);
    return out;
}

}  // namespace strata::gpu::test
