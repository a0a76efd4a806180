// The property batching relies on (runtime/exec/forward.h): for block-quantized weights,
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

using namespace strata;

namespace {
// Random blocks of `type` whose fp16 scales are sane (a random fp16 may be inf or NaN).
std::vector<uint8_t> random_weights(DType type, int64_t n_rows, int64_t n_cols, uint32_t seed) {
    struct Scales { DType type; std::vector<size_t> fp16_at; };
    const Scales table[] = {{DType::Q4_0, {0}},      {DType::Q4_1, {0, 2}},   {DType::Q5_0, {0}},
                            {DType::Q5_1, {0, 2}},   {DType::Q8_0, {0}},      {DType::Q4_K, {0, 2}},
                            {DType::Q5_K, {0, 2}},   {DType::Q6_K, {208}}};
    const auto& tr = traits(type);
    std::vector<uint8_t> w(row_bytes(type, n_cols) * n_rows);
    std::mt19937 rng(seed);
    for (auto& b : w) b = static_cast<uint8_t>(rng());
    for (const auto& s : table) {
        if (s.type != type) continue;
        for (size_t blk = 0; blk < w.size() / tr.block_bytes; ++blk)
            for (size_t off : s.fp16_at) {
                const uint16_t h = 0x2000 | (rng() & 0x03FF);  // about 0.008 .. 0.016
                std::memcpy(&w[blk * tr.block_bytes + off], &h, 2);
            }
    }
    return w;
}
}  // namespace

TEST_CASE("matmul: a token's row has the same bits alone and inside any batch (quantized weights)", "[unit][forward]") {
    cpu::ThreadPool pool(2);
    const int64_t R = 96, C = 512, N = 64;
    std::mt19937 rng(3);
    std::normal_distribution<float> nd;
    std::vector<float> x(N * C);
    for (auto& v : x) v = nd(rng);
    for (DType type : {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
        if (!cpu::has_kernels(type)) continue;
        const auto w = random_weights(type, R, C, 7);
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
