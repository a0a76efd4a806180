// Device::head_matmul on every device: each head's products against double products of the
// reference dequantization of its own matrix, at decode sizes and longer, the rest of the output
// rows untouched; a decode row alone gives its bits; on the simulated device, bit for bit what a
// matmul of the head's values gathered into rows of their own gives.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "gpu/device.h"
#include "tests/support/random_values.h"
#include "tests/support/random_weights.h"
#include "tests/unit/gpu/device_test_support.h"
#include "tests/unit/gpu/reference_weights.h"

using namespace strata;
using namespace strata::gpu;
using strata::gpu::test::TestDevice;
using strata::test::normal_floats;

namespace {

constexpr float kUntouched = 1234.5f;

void head_products(TestDevice& d, DType type, int64_t n_cols) {
    const int32_t H = 3;
    const int64_t n_rows = 37;                              // not a multiple of a thread block's rows
    const int64_t in_w = n_cols + 16, out_w = n_rows + 24;  // each head's values and outputs go on past the product's
    std::mt19937 rng(5);
    const uint64_t head_bytes = row_bytes(type, n_cols) * n_rows;
    std::vector<uint8_t> w;
    std::vector<std::vector<float>> wf;
    for (int32_t h = 0; h < H; ++h) {
        const auto part = strata::test::random_weights(type, n_rows, n_cols, rng);
        w.insert(w.end(), part.begin(), part.end());
        wf.push_back(gpu::test::dequantize_ref(type, part, n_rows, n_cols));
    }
    DeviceBuffer dw = d.upload(w);
    for (int64_t n_tok : {int64_t{1}, int64_t{3}, Device::kRowWiseRows + 2}) {
        INFO(d.dev->name() << ", " << dtype_name(type) << ", " << n_cols << " columns, " << n_tok << " rows");
        const auto x = normal_floats(n_tok * H * in_w, 21);
        DeviceBuffer dx = d.upload(x), dy = d.upload(std::vector<float>(size_t(n_tok * H * out_w), kUntouched));
        const HeadMatmulArgs args{.type = type, .w = dw.data(), .x = dx.as<float>(), .y = dy.as<float>(), .n_rows = n_rows,
                                  .n_cols = n_cols, .n_tok = n_tok, .n_heads = H, .x_row = H * in_w, .x_head = in_w,
                                  .y_row = H * out_w, .y_head = out_w};
        d.dev->head_matmul(args, *d.stream);
        const auto y = d.download<float>(dy, size_t(n_tok * H * out_w));
        // Within the activations' quantization (as matmul's decode rows), or half precision for long runs.
        const double rel = n_tok > Device::kRowWiseRows ? 2e-3 : 4e-4;
        int64_t bad = 0, touched = 0;
        for (int64_t t = 0; t < n_tok; ++t)
            for (int32_t h = 0; h < H; ++h) {
                const float* xh = &x[size_t(t * H * in_w + h * in_w)];
                const float* yh = &y[size_t(t * H * out_w + h * out_w)];
                for (int64_t j = 0; j < n_rows; ++j) {
                    double value = 0, magnitude = 0;
                    for (int64_t k = 0; k < n_cols; ++k) {
                        value += double(wf[h][j * n_cols + k]) * xh[k];
                        magnitude += std::abs(double(wf[h][j * n_cols + k]) * xh[k]);
                    }
                    bad += !(std::abs(yh[j] - value) <= rel * magnitude + 1e-5);
                }
                for (int64_t j = n_rows; j < out_w; ++j) touched += yh[j] != kUntouched;
            }
        CHECK(bad == 0);
        CHECK(touched == 0);
        for (int64_t t = 0; t < n_tok && n_tok <= Device::kRowWiseRows; ++t) {
            // A row alone: its bits.
            HeadMatmulArgs one = args;
            DeviceBuffer dy1 = d.upload(std::vector<float>(size_t(H * out_w), kUntouched));
            one.x += t * H * in_w, one.y = dy1.as<float>(), one.n_tok = 1;
            d.dev->head_matmul(one, *d.stream);
            const auto alone = d.download<float>(dy1, size_t(H * out_w));
            CHECK(std::equal(alone.begin(), alone.end(), y.begin() + t * H * out_w));
        }
        if (d.dev->name() != "sim") continue;
        for (int32_t h = 0; h < H; ++h) {
            // The head's values gathered into rows of their own, through matmul.
            std::vector<float> gathered(size_t(n_tok * n_cols));
            for (int64_t t = 0; t < n_tok; ++t)
                std::copy_n(&x[size_t(t * H * in_w + h * in_w)], n_cols, &gathered[size_t(t * n_cols)]);
            DeviceBuffer dg = d.upload(gathered), dp = d.zeros(size_t(n_tok * n_rows) * 4);
            d.dev->matmul({type, static_cast<const std::byte*>(dw.data()) + h * head_bytes, dg.as<float>(), dp.as<float>(),
                           n_rows, n_cols, n_tok},
                          *d.stream);
            const auto p = d.download<float>(dp, size_t(n_tok * n_rows));
            for (int64_t t = 0; t < n_tok; ++t)
                CHECK(std::equal(p.begin() + t * n_rows, p.begin() + (t + 1) * n_rows, y.begin() + t * H * out_w + h * out_w));
        }
    }
}

// Every weight kind at 256 columns (a K-quant's one super-block a row, one pass of a warp's
// lanes), and float and Q8_0 weights at MLA's widths: attn_k_b's 128 columns (lanes idle) and
// attn_v_b's 512 (lanes looping; Q6_K's two super-blocks).
void head_products(TestDevice& d) {
    for (DType type : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q6_K})
        if (d.dev->supports_weight(type)) head_products(d, type, 256);
    for (DType type : {DType::F16, DType::Q8_0})
        if (d.dev->supports_weight(type)) head_products(d, type, 128);
    for (DType type : {DType::F32, DType::Q8_0, DType::Q6_K})
        if (d.dev->supports_weight(type)) head_products(d, type, 512);
}

}  // namespace

STRATA_DEVICE_TEST("every head's product with its own matrix in one op", head_products)
