// runtime/weights/file_layout: a layer the CPU holds (some matrices in its tiles) written back
// as the model file lays it out, against the file's bytes.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "cpu/quant.h"
#include "cpu/thread_pool.h"
#include "runtime/weights/file_layout.h"
#include "tests/support/random_weights.h"

using namespace strata;
using namespace strata::runtime;

TEST_CASE("file layout: a layer's tiled matrices and vectors come back as the file's bytes, each matrix said ready as written",
          "[unit][stream]") {
    std::mt19937 rng(5);
    // The file: a norm (a vector), then two matrices of 48 rows (three tiles), apart by some padding.
    const int64_t cols = 256, rows = 48;
    const auto norm = test::random_weights(DType::F32, 1, cols, rng);
    const auto q = test::random_weights(DType::Q8_0, rows, cols, rng), k = test::random_weights(DType::Q4_K, rows, cols, rng);
    const uint64_t at_norm = 0, at_q = 1088, at_k = at_q + q.size() + 32;
    std::vector<std::byte> file(at_k + k.size());
    std::memcpy(file.data() + at_norm, norm.data(), norm.size());
    std::memcpy(file.data() + at_q, q.data(), q.size());
    std::memcpy(file.data() + at_k, k.data(), k.size());
    // What the CPU holds: the matrices in its tiles where it has them (the engine's tile_for_cpu).
    auto q_held = q, k_held = k;
    LayerWeights l;
    l.attn_norm = WeightRef{nullptr, norm.data(), DType::F32, cols, 1};
    l.wq = WeightRef{nullptr, q_held.data(), DType::Q8_0, cols, rows};
    l.wk = WeightRef{nullptr, k_held.data(), DType::Q4_K, cols, rows};
    REQUIRE(file_layout_from_memory(l));  // before tiling, as staging asks
    l.wq.tiled = cpu::tile_weights(DType::Q8_0, q_held.data(), rows, cols);
    l.wk.tiled = cpu::tile_weights(DType::Q4_K, k_held.data(), rows, cols);
    if (l.wq.tiled) REQUIRE(q_held != q);
    auto offset = [&](const WeightRef& w) { return w.data == norm.data() ? at_norm : w.data == q_held.data() ? at_q : at_k; };
    std::vector<std::byte> out(file.size(), std::byte{0xee});
    std::vector<uint64_t> ready;
    cpu::ThreadPool pool(2);
    pool.run([&] {
        write_file_layout(l, offset, out.data(), [&](uint64_t n) {
            // Every tensor below n is in place when it is said.
            for (auto [at, size] : {std::pair{at_norm, norm.size()}, {at_q, q.size()}, {at_k, k.size()}})
                if (at + size <= n) CHECK(std::memcmp(out.data() + at, file.data() + at, size) == 0);
            ready.push_back(n);
        });
    });
    for (auto [at, size] : {std::pair{at_norm, norm.size()}, {at_q, q.size()}, {at_k, k.size()}})
        CHECK(std::memcmp(out.data() + at, file.data() + at, size) == 0);
    CHECK(ready == std::vector<uint64_t>{at_q + q.size(), at_k + k.size()});

    // Q8_K's tiles keep only what its kernels read: a layer with such a matrix is not rebuilt
    // where this CPU would tile it (op offload reads it from the file again).
    const auto q8k = test::random_weights(DType::Q8_K, rows, cols, rng);
    l.wk = WeightRef{nullptr, q8k.data(), DType::Q8_K, cols, rows};
    CHECK(file_layout_from_memory(l) == cpu::can_untile(DType::Q8_K, cols));
    std::vector<uint8_t> probe(q8k.size());
    auto tiled = q8k;
    if (cpu::tile_weights(DType::Q8_K, tiled.data(), rows, cols))
        CHECK_FALSE(cpu::untile_weights(DType::Q8_K, tiled.data(), probe.data(), rows, cols));
}
