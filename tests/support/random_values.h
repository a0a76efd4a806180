#pragma once
// Seeded random inputs for the kernel tests.
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace strata::test {

// n values drawn from N(0, sigma^2), the same for the same seed.
inline std::vector<float> normal_floats(size_t n, uint32_t seed, float sigma = 1.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, sigma);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng);
    return v;
}

}  // namespace strata::test
