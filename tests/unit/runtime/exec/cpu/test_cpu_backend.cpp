// The property batching relies on (runtime/exec/cpu/cpu_backend.h): for block-quantized weights,
// cpu::matmul gives a token row the same bits alone (one token, the decode strategy) and
// inside a batch of any size (the prefill strategy, AMX where present), at any offset.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "cpu/matmul.h"
#include "cpu/quant.h"
#include "cpu/thread_pool.h"
#include "tests/support/random_weights.h"

using namespace strata;

TEST_CASE("matmul: a token's row has the same bits alone and inside any batch (quantized weights)", "[unit][forward]") {
    cpu::ThreadPool pool(2);
    const int64_t R = 96, C = 512, N = 64;
    std::mt19937 rng(3);
    std::normal_distribution<float> nd;
    std::vector<float> x(N * C);
    for (auto& v : x) v = nd(rng);
    for (DType type : {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q4_K, DType::Q5_K,
                       DType::Q6_K, DType::Q2_K, DType::Q3_K, DType::IQ4_NL, DType::IQ4_XS}) {
        std::mt19937 wrng(7);
        const auto w = test::random_weights(type, R, C, wrng);
        for (bool int8 : {false, true}) {
            std::vector<float> alone(N * R);
            pool.run([&] {
                for (int64_t t = 0; t < N; ++t) cpu::matmul(type, w.data(), R, C, &x[t * C], 1, &alone[t * R], int8);
            });
            for (int64_t n : {2, 4, 5, 8, 17, 64})
                for (int64_t first : {int64_t(0), int64_t(3)}) {
                    if (first + n > N) continue;
                    std::vector<float> y(n * R);
                    pool.run([&] { cpu::matmul(type, w.data(), R, C, &x[first * C], n, y.data(), int8); });
                    INFO(dtype_name(type) << (int8 ? " int8" : "") << ": batch of " << n << " from token " << first);
                    for (int64_t t = 0; t < n; ++t) REQUIRE(std::memcmp(&y[t * R], &alone[(first + t) * R], R * sizeof(float)) == 0);
                }
        }
    }
}
