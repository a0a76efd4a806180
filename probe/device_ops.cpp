// A device's matmuls measured through gpu::Device (the same calls the device backend makes),
// and the whole of measure_device_ops; its attention, launches, copies and hand-offs are in
// device_costs.cpp.
#include "probe/device_ops.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <span>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "gpu/device.h"
#include "probe/device_costs.h"
#include "probe/narrow_layer.h"
#include "probe/typical.h"

namespace strata::probe {

namespace {

constexpr int64_t kCols = static_cast<int64_t>(planner::KernelRate::kWideCols);
constexpr int64_t kManyRows = 512;  // a prompt pass's rows (llama-bench's pp512)
// The most rows a GEMM call of the probe takes (its inputs' and outputs' size).
constexpr int64_t kMostRows = 4096;

// The weights a decode call streams: about 4x the host's last-level cache, so that the simulated
// device reads them from DRAM as it reads a model's.
uint64_t gemv_bytes(bool quick, uint64_t llc_bytes) {
    return quick ? 48ull << 20 : std::clamp<uint64_t>(4 * llc_bytes, 128ull << 20, 512ull << 20);
}

// Device buffers for one weight type's measurements.
struct MatmulBench {
    gpu::Device& dev;
    gpu::Stream& s;
    DType type;
    const gpu::DeviceBuffer& w;  // the weights: n_rows() x kCols of `type` (narrower rows sweep its first half)
    const gpu::DeviceBuffer& x;  // kMostRows x kCols floats
    const gpu::DeviceBuffer& y;
    int reps;

    size_t row_b(int64_t cols) const { return row_bytes(type, cols); }
    int64_t n_rows() const { return static_cast<int64_t>(w.bytes() / row_b(kCols)); }
    // One call of `tokens` rows over `rows` weight rows of `cols` values starting `offset` bytes in.
    void call(int64_t rows, int64_t cols, int64_t tokens, size_t offset = 0) const {
        gpu::MatmulArgs a{type, w.as<std::byte>() + offset, x.as<float>(), y.as<float>(), rows, cols, tokens};
        dev.matmul(a, s);
    }
    // One Device::matmul_group of `tokens` rows over consecutive matrices (rows x cols each, of
    // one width) from `offset` bytes in, each into its own rows of y: the bytes they take.
    size_t group(std::span<const std::pair<int64_t, int64_t>> mats, int64_t tokens, size_t offset) const {
        std::array<gpu::MatmulArgs, gpu::Device::kMaxLaunchProducts> parts;
        STRATA_ASSERT(mats.size() <= parts.size());
        float* out = y.as<float>();
        size_t bytes = 0;
        for (size_t i = 0; i < mats.size(); ++i) {
            const auto [rows, cols] = mats[i];
            parts[i] = {type, w.as<std::byte>() + offset + bytes, x.as<float>(), out, rows, cols, tokens};
            out += rows * tokens, bytes += size_t(rows) * row_b(cols);
        }
        dev.matmul_group(std::span<const gpu::MatmulArgs>(parts.data(), mats.size()), s);
        return bytes;
    }
    template <class Work>
    double seconds(Work work) const {
        s.synchronize();
        const auto t0 = std::chrono::steady_clock::now();
        work();
        s.synchronize();
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    double typical_s(auto work) const {
        std::vector<double> t;
        for (int i = 0; i < reps; ++i) t.push_back(seconds(work));
        return median(std::move(t));
    }
    // A call's cost beyond its bytes for rows of `cols` values: the same weights swept in calls
    // of 64 and of 1024 rows, back to back, the difference per extra call (the median of pairs).
    double call_s(int64_t cols) const {
        const int64_t rows = static_cast<int64_t>(w.bytes() / 2 / row_b(cols));
        auto sweep = [&](int64_t call_rows) {
            return seconds([&] {
                for (int64_t r = 0; r + call_rows <= rows; r += call_rows) call(call_rows, cols, 1, size_t(r) * row_b(cols));
            });
        };
        constexpr int64_t kSmall = 64, kLarge = 1024;
        const double n_s = double(rows / kSmall), n_l = double(rows / kLarge), rows_s = n_s * kSmall, rows_l = n_l * kLarge;
        std::vector<double> per_call;
        for (int i = 0; i < reps; ++i) {
            const double small = sweep(kSmall), large = sweep(kLarge);
            per_call.push_back((small * rows_l - large * rows_s) / (n_s * rows_l - n_l * rows_s));
        }
        return std::max(0.0, median(std::move(per_call)));
    }
};

// Their GEMM at 256 rows each: flops per second, small matrices giving a device few tiles each.
double narrow_layer_gflops(const MatmulBench& b) {
    constexpr int64_t kTokens = 256;
    double flops = 0;
    for (auto [rows, cols] : kNarrowLayer) flops += 2.0 * double(rows * cols * kTokens);
    const double s = b.typical_s([&] {
        size_t off = 0;
        for (auto [rows, cols] : kNarrowLayer) b.call(rows, cols, kTokens, off), off += size_t(rows) * b.row_b(cols);
    });
    return flops / s / 1e9;
}

// The same matrices in decode, `tokens` rows a call, layer after layer over all the weights (from
// DRAM, as a model's layers), q/k/v and gate/up one group each as the device backend issues them:
// bytes per second beyond the four calls' costs as `r` prices them, which a layer's launches add
// on their own.
// A layer's matmul groups (first of kNarrowLayer's matrices, how many): q/k/v, the output,
// gate/up, down.
constexpr std::pair<size_t, size_t> kNarrowGroups[] = {{0, 3}, {3, 1}, {4, 2}, {6, 1}};

double narrow_layer_gemv_gbps(const MatmulBench& b, const planner::KernelRate& r, int64_t tokens) {
    size_t layer_bytes = 0;
    for (auto [rows, cols] : kNarrowLayer) layer_bytes += size_t(rows) * b.row_b(cols);
    const double calls_s = 3 * r.call_s(double(b.row_b(kNarrow))) + r.call_s(double(b.row_b(3 * kNarrow)));
    const size_t layers = b.w.bytes() / layer_bytes;
    const std::span<const std::pair<int64_t, int64_t>> m(kNarrowLayer);
    const double s = b.typical_s([&] {
        size_t off = 0;
        for (size_t l = 0; l < layers; ++l)
            for (auto [first, n] : kNarrowGroups) off += b.group(m.subspan(first, n), tokens, off);
    });
    const double beyond_calls = s - double(layers) * calls_s;
    return beyond_calls > 0 ? double(layers * layer_bytes) / beyond_calls / 1e9 : 0;
}

planner::KernelRate measure_matmuls(const MatmulBench& b, bool quick) {
    planner::KernelRate r{b.type, 0, 0};
    const int64_t rows = b.n_rows();
    const double bytes = double(rows) * double(b.row_b(kCols));
    r.gemv_gbps = bytes / b.typical_s([&] { b.call(rows, kCols, 1); }) / 1e9;
    r.rows4_gbps = bytes / b.typical_s([&] { b.call(rows, kCols, 4); }) / 1e9;
    r.rows8_gbps = bytes / b.typical_s([&] { b.call(rows, kCols, 8); }) / 1e9;
    r.rows16_gbps = bytes / b.typical_s([&] { b.call(rows, kCols, gpu::Device::kRowWiseRows); }) / 1e9;
    // Split into a fixed part and a part per row byte by two widths, as the CPU's decode calls.
    const double wide = b.call_s(kCols), narrow = b.call_s(kNarrow);
    const double per_byte = std::max(0.0, (wide - narrow) / double(b.row_b(kCols) - b.row_b(kNarrow)));
    r.call_ns_per_row_byte = per_byte * 1e9;
    r.call_us = std::max(0.0, narrow - per_byte * double(b.row_b(kNarrow))) * 1e6;
    if (!quick) {
        r.gemv_narrow_gbps = narrow_layer_gemv_gbps(b, r, 1);
        r.rows4_narrow_gbps = narrow_layer_gemv_gbps(b, r, 4);
        r.rows8_narrow_gbps = narrow_layer_gemv_gbps(b, r, 8);
        r.rows16_narrow_gbps = narrow_layer_gemv_gbps(b, r, gpu::Device::kRowWiseRows);
    }
    // Many rows against square weights give the arithmetic per row: n and 2n rows, n doubled
    // from a prompt's rows (64 quick) until twice the rows take at least kLinear times as long,
    // aiming past what fills the device; where that never happens (up to kMostRows, 2048 quick),
    // the rate of the most rows, their fixed part included. A GPU's 64 rows expand the weights to
    // half and run cuBLAS on a grid too small for the card, so what 512 took beyond them read as
    // about 1e6 GFLOPS on the H200, above its peak, and priced its prefill 2x fast. What 64 rows
    // take over all the weights beyond the arithmetic is the call's pass over them (from DRAM,
    // unless quick); on a GPU that includes reading the expanded weights, so a long prompt is
    // priced a little high.
    constexpr double kLinear = 1.8;
    const int64_t g_rows = std::min<int64_t>(rows, kCols);
    const double flops_per_row = 2.0 * double(g_rows) * kCols;
    auto time_rows = [&](int64_t n) { return b.typical_s([&] { b.call(g_rows, kCols, n); }); };
    const int64_t most = quick ? kMostRows / 2 : kMostRows;
    int64_t many = quick ? kManyRows / 8 : kManyRows;
    double t_many = time_rows(many), t_more = time_rows(2 * many);
    while (t_more < kLinear * t_many && 4 * many <= most) many *= 2, t_many = t_more, t_more = time_rows(2 * many);
    const double per_row = (t_more - t_many) / double(many);
    const bool split = per_row > 0 && t_more >= kLinear * t_many;
    r.gemm_gflops = split ? flops_per_row / per_row / 1e9 : flops_per_row * double(2 * many) / t_more / 1e9;
    if (quick) return r;
    if (split) {
        const double t64_all = b.typical_s([&] { b.call(rows, kCols, 64); });
        const double pass_s = t64_all - 64 * per_row * double(rows) / double(g_rows);
        if (pass_s > 0) r.pack_gbps = bytes / pass_s / 1e9;
    }
    r.gemm_narrow_gflops = narrow_layer_gflops(b);
    return r;
}

// Floats of output for every call: 64 rows over the whole matrix of the type with the shortest
// rows, or the most rows over the square weights.
uint64_t output_floats(uint64_t w_bytes) {
    return std::max<uint64_t>((w_bytes / row_bytes(DType::Q4_0, kCols) + 1) * 64, uint64_t(kMostRows) * kCols);
}
constexpr uint64_t kInputBytes = uint64_t(kMostRows) * kCols * 4;

}  // namespace

uint64_t device_ops_bytes(bool quick, uint64_t llc_bytes) {
    const uint64_t w = gemv_bytes(quick, llc_bytes);
    // A GPU's matmul scratch for the most rows: their input as halves, then a chunk of expanded weights.
    const uint64_t scratch = 2 * uint64_t(kMostRows) * kCols * 2;
    return w + kInputBytes + 4 * output_floats(w) + scratch + device_costs_bytes(quick) + (16ull << 20);  // alignment's slack
}

planner::DeviceOps measure_device_ops(gpu::Device& dev, const std::vector<DType>& types, bool quick, uint64_t llc_bytes) {
    planner::DeviceOps ops;
    auto s = dev.make_stream("probe");
    {
        const uint64_t w_bytes = gemv_bytes(quick, llc_bytes);
        const gpu::DeviceBuffer w = dev.memory().allocate(w_bytes, "probe weights");
        // 0x11: small finite scales and values in every type, as the CPU's probe uses.
        fill(dev, *s, w, 0x11);
        const gpu::DeviceBuffer x = dev.memory().allocate(kInputBytes, "probe inputs");
        const gpu::DeviceBuffer y = dev.memory().allocate(4 * output_floats(w_bytes), "probe outputs");
        fill(dev, *s, x, 0x3c);  // floats of about 0.01
        for (DType t : types) {
            if (!dev.supports_weight(t)) continue;
            try {
                planner::KernelRate r = measure_matmuls({dev, *s, t, w, x, y, quick ? 3 : 5}, quick);
                if (r.gemv_gbps > 0 && r.gemm_gflops > 0) ops.rates.push_back(r);
            } catch (const BackendError&) {
                // no kernels for this type here
            }
        }
    }
    measure_device_costs(dev, *s, quick, ops);
    return ops;
}

planner::DeviceOps measure_sim_device(const std::vector<DType>& types, int threads, bool quick, uint64_t llc_bytes) {
    gpu::SimOptions o;
    o.budget_bytes = device_ops_bytes(quick, llc_bytes);
    o.n_threads = threads;
    o.link_gbps = 1000;  // unthrottled: its copies' own rate is what is measured
    auto dev = gpu::make_sim_device(o);
    planner::DeviceOps ops = measure_device_ops(*dev, types, quick, llc_bytes);
    ops.n_threads = threads;
    return ops;
}

}  // namespace strata::probe
