#pragma once
// Random weight matrices of any CPU weight type, for the kernel tests.
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "core/dtype.h"

namespace strata::test {

// n_rows rows of n_cols values of `type`, rows row_bytes(type, n_cols) apart. Float types:
// N(0, 1) values. Block types: random bytes (every bit pattern is a valid block), then every
// scale field set to a finite value of random sign and magnitude log-uniform in [1e-3, 1] (a
// random fp16 may be inf or NaN: cpu::f16_scale_fields), as tests/reference/make_quant_fixtures.py does.
std::vector<uint8_t> random_weights(DType type, int64_t n_rows, int64_t n_cols, std::mt19937& rng);

}  // namespace strata::test
