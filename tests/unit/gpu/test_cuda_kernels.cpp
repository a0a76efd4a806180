// The CUDA weight kernels against the CPU scalar reference at their own precision, on random
// inputs with odd sizes (row counts that are not a multiple of the warps per block, more blocks
// per row than lanes per warp). The other kernels are checked through the device interface,
// with the same bodies as the simulated device (test_device.cpp).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "cpu/quant_ref.h"
#include "gpu/cuda_kernels.h"
#include "tests/support/random_values.h"
#include "tests/unit/gpu/random_weights.h"
#include "tests/unit/gpu/cuda_test_support.h"

using namespace strata;
using namespace strata::gpu;
using strata::gpu::test::TestGpu;
using strata::test::normal_floats;
using strata::gpu::test::dequantize_ref;
using strata::gpu::test::random_weights;

namespace {

struct Case {
    DType type;
    int64_t n_cols;
};
// Column counts: 37 blocks of 32, or 5 super-blocks of 256 (40 or 80 items per row), and 333
// F16 values: more items than the 32 lanes of a warp, and not a multiple of them.
const Case kCases[] = {{DType::F16, 333}, {DType::Q4_0, 37 * 32}, {DType::Q4_1, 37 * 32},
                       {DType::Q8_0, 37 * 32}, {DType::Q4_K, 5 * 256}, {DType::Q6_K, 5 * 256}};
constexpr int64_t kRows = 37;  // not a multiple of the 4 rows per thread block

}  // namespace

TEST_CASE("gpu gemv matches the CPU references for every GPU weight type", "[gpu]") {
    STRATA_REQUIRE_CUDA_GPU();
    TestGpu g;
    for (const Case& c : kCases) {
        INFO("type " << dtype_name(c.type) << ", " << kRows << " x " << c.n_cols);
        REQUIRE(gpu_weight_type(c.type));
        const auto w = random_weights(c.type, kRows, c.n_cols, 11);
        const auto x = normal_floats(c.n_cols, 12);
        DeviceBuffer dw = g.upload(w), dx = g.upload(x), dy = g.zeros(kRows * sizeof(float));
        gemv(c.type, dw.data(), dx.as<float>(), dy.as<float>(), kRows, c.n_cols, g.stream);
        const auto y = g.download<float>(dy, kRows);

        // Reference 1: dequantize_row_ref, then a double dot product.
        const auto wf = dequantize_ref(c.type, w, kRows, c.n_cols);
        // Reference 2: vec_dot_ref on the activations in the CPU's format for this type (Q8x2:
        // each value within amax/65024 of x, so a looser bound).
        const cpu::ActFormat fmt = c.type == DType::F16 ? cpu::ActFormat::F32 : cpu::ActFormat::Q8x2;
        std::vector<uint8_t> act(fmt == cpu::ActFormat::F32 ? c.n_cols * sizeof(float) : cpu::act_q8x2_bytes(c.n_cols));
        cpu::quantize_act_ref(fmt, x.data(), act.data(), c.n_cols);
        const float x_amax = std::abs(*std::max_element(x.begin(), x.end(), [](float a, float b) { return std::abs(a) < std::abs(b); }));
        for (int64_t r = 0; r < kRows; ++r) {
            double ref = 0, mag = 0, wabs = 0;
            for (int64_t k = 0; k < c.n_cols; ++k) {
                ref += double(wf[r * c.n_cols + k]) * x[k];
                mag += std::abs(double(wf[r * c.n_cols + k]) * x[k]);
                wabs += std::abs(wf[r * c.n_cols + k]);
            }
            INFO("row " << r);
            CHECK(std::abs(y[r] - ref) <= 2e-4 * mag + 1e-6);
            const float vref = cpu::vec_dot_ref(c.type, w.data() + r * row_bytes(c.type, c.n_cols), act.data(), c.n_cols);
            const double act_err = fmt == cpu::ActFormat::F32 ? 0.0 : wabs * x_amax / 30000.0;
            CHECK(std::abs(y[r] - vref) <= act_err + 4e-4 * mag + 1e-6);
        }
    }
}

TEST_CASE("gpu dequantize_f16 matches dequantize_row_ref to half precision", "[gpu]") {
    STRATA_REQUIRE_CUDA_GPU();
    TestGpu g;
    for (const Case& c : kCases) {
        INFO("type " << dtype_name(c.type));
        const auto w = random_weights(c.type, kRows, c.n_cols, 21);
        DeviceBuffer dw = g.upload(w), dh = g.zeros(kRows * c.n_cols * 2);
        dequantize_f16(c.type, dw.data(), dh.as<uint16_t>(), kRows, c.n_cols, g.stream);
        const auto h = g.download<uint16_t>(dh, kRows * c.n_cols);
        const auto ref = dequantize_ref(c.type, w, kRows, c.n_cols);
        int64_t bad = 0;
        for (size_t i = 0; i < ref.size(); ++i) {
            // One half-precision step: the GPU may fuse the scale multiply-add before rounding.
            const float got = cpu::fp16_to_fp32(h[i]);
            bad += !(std::abs(got - ref[i]) <= std::abs(ref[i]) * 0x1p-10f + 0x1p-24f);
        }
        CHECK(bad == 0);
    }
}

TEST_CASE("gpu f16 GEMM through cuBLAS matches a double reference on the rounded inputs", "[gpu]") {
    STRATA_REQUIRE_CUDA_GPU();
    TestGpu g;
    Cublas blas;
    const int64_t n_rows = kRows, n_cols = 5 * 256, n_tok = 7;
    const auto w = random_weights(DType::Q4_K, n_rows, n_cols, 31);
    const auto x = normal_floats(n_tok * n_cols, 32);
    DeviceBuffer dw = g.upload(w), dx = g.upload(x);
    DeviceBuffer wh = g.zeros(n_rows * n_cols * 2), xh = g.zeros(n_tok * n_cols * 2), dy = g.zeros(n_tok * n_rows * 4);
    dequantize_f16(DType::Q4_K, dw.data(), wh.as<uint16_t>(), n_rows, n_cols, g.stream);
    convert_f32_to_f16(dx.as<float>(), xh.as<uint16_t>(), n_tok * n_cols, g.stream);
    blas.gemm_f16(wh.as<uint16_t>(), xh.as<uint16_t>(), dy.as<float>(), n_rows, n_cols, n_tok, g.stream);
    const auto y = g.download<float>(dy, n_tok * n_rows);
    // convert_f32_to_f16 rounds like the CPU's fp32_to_fp16 (nearest even): exact equality.
    const auto xh_host = g.download<uint16_t>(xh, n_tok * n_cols);
    int64_t bad_convert = 0;
    for (size_t i = 0; i < x.size(); ++i) bad_convert += xh_host[i] != cpu::fp32_to_fp16(x[i]);
    CHECK(bad_convert == 0);

    const auto wh_host = g.download<uint16_t>(wh, n_rows * n_cols);
    for (int64_t t = 0; t < n_tok; ++t)
        for (int64_t r = 0; r < n_rows; ++r) {
            double ref = 0, mag = 0;
            for (int64_t k = 0; k < n_cols; ++k) {
                const double p = double(cpu::fp16_to_fp32(wh_host[r * n_cols + k])) * cpu::fp16_to_fp32(xh_host[t * n_cols + k]);
                ref += p;
                mag += std::abs(p);
            }
            INFO("token " << t << ", row " << r);
            CHECK(std::abs(y[t * n_rows + r] - ref) <= 2e-4 * mag + 1e-6);
        }
}
