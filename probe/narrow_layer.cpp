#include "probe/narrow_layer.h"

#include <array>
#include <chrono>
#include <vector>

#include "core/kernel_shapes.h"
#include "cpu/matmul.h"
#include "cpu/quant.h"
#include "cpu/thread_pool.h"
#include "probe/huge_pages.h"
#include "probe/typical.h"

namespace strata::probe {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

double narrow_over_wide(DType type, cpu::ThreadPool& pool, bool tile, const uint8_t* wide, bool wide_tiled) {
    constexpr int64_t E = kNarrow, kTokens = 256;
    constexpr int64_t W = static_cast<int64_t>(planner::KernelRate::kWideCols), kWideTokens = 64;
    struct Matrix {
        std::vector<uint8_t> w;
        int64_t rows, cols;
        bool tiled = false;
    };
    std::vector<Matrix> layer;
    double narrow_flops = 0;
    for (auto [rows, cols] : kNarrowLayer) {
        Matrix m{std::vector<uint8_t>(row_bytes(type, cols) * static_cast<size_t>(rows), 0x11), rows, cols};
        if (tile) pool.run([&] { m.tiled = cpu::tile_weights(type, m.w.data(), rows, cols); });
        narrow_flops += 2.0 * static_cast<double>(rows * cols * kTokens);
        layer.push_back(std::move(m));
    }
    const double wide_flops = 2.0 * static_cast<double>(W * W * kWideTokens);
    std::vector<float> x(static_cast<size_t>(3 * E * kTokens), 0.01f), y(static_cast<size_t>(3 * E * kTokens));
    std::vector<double> ratios;
    for (int rep = 0; rep < 7; ++rep) {
        auto t0 = std::chrono::steady_clock::now();
        pool.run([&] {
            for (const Matrix& m : layer)
                cpu::matmul(type, m.w.data(), m.rows, m.cols, x.data(), kTokens, y.data(), false, m.tiled);
        });
        const double narrow_s = seconds_since(t0);
        t0 = std::chrono::steady_clock::now();
        pool.run([&] { cpu::matmul(type, wide, W, W, x.data(), kWideTokens, y.data(), false, wide_tiled); });
        const double wide_s = seconds_since(t0);
        ratios.push_back((narrow_flops / narrow_s) / (wide_flops / wide_s));
    }
    return median(std::move(ratios));
}

void measure_narrow_gemv(DType type, cpu::ThreadPool& pool, bool tile, size_t bytes, planner::KernelRate& r,
                         const std::function<double(cpu::ThreadPool&, int64_t)>& wide_gbps) {
    // Each matrix on a 64-byte boundary within its layer, as the engine's tensors lie.
    constexpr size_t kMatrices = std::size(kNarrowLayer);
    std::array<size_t, kMatrices> at{};
    size_t layer_span = 0, layer_bytes = 0;
    for (size_t i = 0; i < kMatrices; ++i) {
        const size_t b = static_cast<size_t>(kNarrowLayer[i].first) * row_bytes(type, kNarrowLayer[i].second);
        at[i] = layer_span, layer_span += (b + 63) / 64 * 64, layer_bytes += b;
    }
    const size_t layers = std::max<size_t>(2, bytes / layer_span);
    const HugePages pages(layers * layer_span, "narrow-layer GEMV probe weights");
    std::fill(pages.data, pages.data + layers * layer_span, uint8_t{0x11});  // small finite scales and values
    bool tiled = false;
    if (tile)
        pool.run([&] {
            for (size_t l = 0; l < layers; ++l)
                for (size_t i = 0; i < kMatrices; ++i)
                    tiled = cpu::tile_weights(type, pages.data + l * layer_span + at[i], kNarrowLayer[i].first, kNarrowLayer[i].second);
        });
    // q/k/v, the output, gate/up and down: four calls a layer, as the cost model counts them.
    const double calls_s = 3 * r.call_s(double(row_bytes(type, kNarrow))) + r.call_s(double(row_bytes(type, 3 * kNarrow)));
    constexpr int64_t kMaxTokens = 8;
    std::vector<float> x(3 * kNarrow * kMaxTokens, 0.01f), y(8 * kNarrow * kMaxTokens);
    auto out = [&](const uint8_t* layer, size_t i, int64_t y_at) {
        return cpu::MatmulOut{type, layer + at[i], kNarrowLayer[i].first, y.data() + y_at, tiled};
    };
    auto step = [&](int64_t tokens) {
        for (size_t l = 0; l < layers; ++l) {
            const uint8_t* layer = pages.data + l * layer_span;
            const int64_t n = tokens * kNarrow;  // y's rows of one matrix, kNarrow wide
            const cpu::MatmulOut qkv[] = {out(layer, 0, 0), out(layer, 1, n), out(layer, 2, 2 * n)};
            cpu::matmul_many(qkv, kNarrow, x.data(), tokens);
            cpu::matmul(type, layer + at[3], kNarrow, kNarrow, x.data(), tokens, y.data(), false, tiled);
            const cpu::MatmulOut gate_up[] = {out(layer, 4, 0), out(layer, 5, 3 * n)};
            cpu::matmul_many(gate_up, kNarrow, x.data(), tokens);
            cpu::matmul(type, layer + at[6], kNarrow, 3 * kNarrow, x.data(), tokens, y.data(), false, tiled);
        }
    };
    // In back-to-back pairs with a pass over the wide matrix, as the GEMM's ratio above: the
    // median ratio times the wide rate, so that a busy moment moves neither apart from the other.
    auto narrow_over_wide_on = [&](cpu::ThreadPool& on, int64_t tokens) {
        on.run([&] { step(tokens); });  // warm: the kernels' scratch allocated
        std::vector<double> ratios;
        for (int rep = 0; rep < 7; ++rep) {
            const auto t0 = std::chrono::steady_clock::now();
            on.run([&] { step(tokens); });
            const double beyond_calls = seconds_since(t0) - double(layers) * calls_s;
            const double wide = wide_gbps(on, tokens);
            ratios.push_back(beyond_calls > 0 ? double(layers * layer_bytes) / beyond_calls / 1e9 / wide : 0);
        }
        return median(std::move(ratios));
    };
    r.gemv_narrow_gbps = r.gemv_gbps * narrow_over_wide_on(pool, 1);
    if (r.rows4_gbps > 0) r.rows4_narrow_gbps = r.rows4_gbps * narrow_over_wide_on(pool, 4);
    if (r.rows8_gbps > 0) r.rows8_narrow_gbps = r.rows8_gbps * narrow_over_wide_on(pool, kMaxTokens);
    if (pool.n_threads() > 1) {
        cpu::ThreadPool one(1);
        r.gemv_thread_narrow_gbps = r.gemv_thread_gbps * narrow_over_wide_on(one, 1);
    } else {
        r.gemv_thread_narrow_gbps = r.gemv_narrow_gbps;
    }
}

}  // namespace strata::probe
