// The CUDA weight and KV kernels piece by piece against the CPU references, on random inputs
// with odd sizes and poisoned outputs (every value must be written): the activation quantizer
// and the KV writers byte for byte, the decode matmul per weight type within float summation
// order of cpu::vec_dot_ref, the tensor-core matmul against a double product of the
// half-rounded inputs, the weight expansion to half against the reference values and the
// cuBLAS product over expanded chunks against a double product, small copies from mapped
// memory byte for byte. The device interface's ops as a whole are checked in test_device.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <random>
#include <vector>

#include "cpu/kv_format.h"
#include "cpu/quant_ref.h"
#include "gpu/cuda_host.h"
#include "gpu/cuda_kernels.h"
#include "storage/pinned_pool.h"
#include "tests/support/random_values.h"
#include "tests/support/random_weights.h"
#include "tests/unit/gpu/cuda_test_support.h"
#include "tests/unit/gpu/reference_weights.h"

using namespace strata;
using namespace strata::gpu;
using strata::gpu::test::TestGpu;
using strata::test::normal_floats;

namespace {

const DType kBlockTypes[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::IQ4_NL, DType::MXFP4, DType::Q2_K,
                             DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q8_K, DType::IQ4_XS};
constexpr int64_t kRows = 37;  // not a multiple of any row tile

std::vector<float> nans(size_t n) { return std::vector<float>(n, std::nanf("")); }

struct Shape {
    int64_t n_rows, n_cols, n_tok;
};
// Elements of y (n_tok rows of n_rows) farther than rel of the products' magnitude (plus abs)
// from base's element plus the double product of weight row r and activation row t, both
// rounded to half first when `half_rounded`.
int64_t off_double_product(const std::vector<float>& y, const std::vector<float>& wf, const std::vector<float>& x, Shape sh,
                           bool half_rounded, double rel, double abs, const std::vector<float>* base = nullptr) {
    auto value = [&](float v) { return half_rounded ? double(cpu::fp16_to_fp32(cpu::fp32_to_fp16(v))) : double(v); };
    int64_t off = 0;
    for (int64_t t = 0; t < sh.n_tok; ++t)
        for (int64_t r = 0; r < sh.n_rows; ++r) {
            double ref = base ? (*base)[t * sh.n_rows + r] : 0.0, mag = 0;
            for (int64_t k = 0; k < sh.n_cols; ++k) {
                const double p = value(wf[r * sh.n_cols + k]) * value(x[t * sh.n_cols + k]);
                ref += p;
                mag += std::abs(p);
            }
            off += !(std::abs(y[t * sh.n_rows + r] - ref) <= rel * mag + abs);
        }
    return off;
}

}  // namespace

TEST_CASE("gpu decode attention's scratch stays within kAttentionScratchBytes at long contexts", "[unit]") {
    // llama3-8b's heads: 32 of 128. A pass of 256 rows at 8K and 128K positions (512 and 8192
    // blocks) takes its rows a group at a time; a short context's (128 positions) rows all at once.
    const int32_t heads = 32, head_dim = 128;
    for (const int32_t blocks : {512, 8192}) {
        INFO(blocks << " blocks");
        const int64_t per_launch = attention_rows_per_launch(heads, head_dim, blocks);
        CHECK(per_launch >= 1);
        CHECK(per_launch < 256);
        CHECK(attention_scratch_floats(256, heads, head_dim, blocks) * 4 <= kAttentionScratchBytes);
        CHECK(attention_scratch_floats(256, heads, head_dim, blocks) ==
              size_t(per_launch) * attention_row_scratch_floats(heads, head_dim, blocks));
    }
    CHECK(attention_rows_per_launch(heads, head_dim, 8) >= 256);
    CHECK(attention_scratch_floats(256, heads, head_dim, 8) == 256 * attention_row_scratch_floats(heads, head_dim, 8));
    // From 16 blocks to 2048 keys a row takes 16 splits (a shallow row's short ones): 252 rows a launch.
    for (const int32_t blocks : {16, 32, 128}) CHECK(attention_rows_per_launch(heads, head_dim, blocks) == 252);
    // One row past the budget still gets its scratch.
    const int32_t huge = 1 << 20;
    CHECK(attention_rows_per_launch(heads, head_dim, huge) == 1);
    CHECK(attention_scratch_floats(7, heads, head_dim, huge) == attention_row_scratch_floats(heads, head_dim, huge));
}

TEST_CASE("gpu quantize_acts writes cpu::quantize_act_ref's bytes", "[gpu]") {
    STRATA_REQUIRE_CUDA_GPU();
    TestGpu g;
    const int64_t n_tok = 3, n_cols = 40 * 32;
    auto x = normal_floats(n_tok * n_cols, 1);
    for (int j = 64; j < 96; ++j) x[j] = 0.0f;  // a zero block
    DeviceBuffer dx = g.upload(x), dq = g.upload(std::vector<uint8_t>(quantized_acts_bytes(n_tok, n_cols), 0xAB));
    for (const bool two_level : {true, false}) {
        quantize_acts(dx.as<float>(), n_tok, n_cols, two_level, dq.data(), g.stream);
        const auto got = g.download<uint8_t>(dq, quantized_acts_bytes(n_tok, n_cols));
        const size_t row = cpu::act_q8x2_bytes(n_cols);
        REQUIRE(row * n_tok == got.size());
        for (int64_t t = 0; t < n_tok; ++t) {
            std::vector<uint8_t> ref(row, 0);
            cpu::quantize_act_ref(two_level ? cpu::ActFormat::Q8x2 : cpu::ActFormat::Q8, x.data() + t * n_cols, ref.data(), n_cols);
            // The padding after a row's sums is not written: compare what the format defines.
            const size_t used = size_t(n_cols) * 2 + size_t(n_cols / 32) * 20;
            CHECK(std::memcmp(got.data() + t * row, ref.data(), used) == 0);
        }
    }
}

TEST_CASE("gpu matvec per weight type matches vec_dot_ref on the same activations, each row as alone", "[gpu]") {
    STRATA_REQUIRE_CUDA_GPU();
    TestGpu g;
    std::mt19937 rng(3);
    for (const DType type : kBlockTypes) {
        // Whole tiles then a part (5120), one partial tile (256), and gpt-oss's 2880 and an odd
        // number of blocks (1056: not whole super-blocks) for the 32-value types.
        for (const int64_t n_cols : {int64_t{256}, int64_t{5 * 256}, int64_t{4096}, int64_t{5120}, int64_t{14336},
                                     int64_t{2880}, int64_t{33 * 32}}) {
            if (n_cols % traits(type).block_elems != 0) continue;
            INFO(dtype_name(type) << ", " << n_cols << " columns");
            REQUIRE(gpu_weight_type(type));
            const auto w = strata::test::random_weights(type, kRows, n_cols, rng);
            std::vector<std::vector<float>> wf(kRows, std::vector<float>(n_cols));
            for (int64_t r = 0; r < kRows; ++r) cpu::dequantize_row_ref(type, w.data() + r * row_bytes(type, n_cols), wf[r].data(), n_cols);
            DeviceBuffer dw = g.upload(w);
            std::vector<float> first_rows;  // the 5-row call's outputs: larger calls give their rows the same bits
            // 5 rows, 13 (a second group of activation rows, partial) and kMatvecRows.
            for (const int64_t n_tok : {int64_t{5}, int64_t{13}, kMatvecRows}) {
                INFO(n_tok << " rows");
                const auto x = normal_floats(n_tok * n_cols, 4);  // the same first rows in every call
                DeviceBuffer dx = g.upload(x), dy = g.upload(nans(n_tok * kRows));
                DeviceBuffer dq = g.zeros(quantized_acts_bytes(n_tok, n_cols));
                WeightMatmul m{type, dw.data(), dx.as<float>(), dy.as<float>(), kRows, n_cols, n_tok, kRows};
                quantize_acts(m.x, n_tok, n_cols, true, dq.data(), g.stream);
                matvec(std::span(&m, 1), dq.data(), g.stream);
                const auto y = g.download<float>(dy, n_tok * kRows);
                const auto acts = g.download<uint8_t>(dq, quantized_acts_bytes(n_tok, n_cols));
                int64_t bad = 0;
                std::vector<float> af(n_cols);
                for (int64_t t = 0; t < n_tok; ++t) {
                    const uint8_t* act = acts.data() + t * cpu::act_q8x2_bytes(n_cols);
                    cpu::dequantize_act_ref(cpu::ActFormat::Q8x2, act, af.data(), n_cols);
                    for (int64_t r = 0; r < kRows; ++r) {
                        const float ref = cpu::vec_dot_ref(type, w.data() + r * row_bytes(type, n_cols), act, n_cols);
                        // Same block terms; only the order of their float sum differs.
                        double mag = 0;
                        for (int64_t k = 0; k < n_cols; ++k) mag += std::abs(double(wf[r][k]) * af[k]);
                        bad += !(std::abs(y[t * kRows + r] - ref) <= 1e-5 * mag + 1e-6);
                    }
                }
                CHECK(bad == 0);
                if (first_rows.empty()) first_rows = y;
                else CHECK(std::equal(first_rows.begin(), first_rows.end(), y.begin()));
            }
        }
    }
}

// Thousands of rows a weight, so that a launch has more work items than the device runs thread
// blocks at once: each thread block loops over items, and a warp's next tile crosses rows and
// the launch's parts (q, k and v). Q4_0 rows of 4096 values give a warp one tile a row, Q6_K's
// of 14336 several.
TEST_CASE("gpu matvec, three weights of thousands of rows a launch, matches vec_dot_ref, each row as alone", "[gpu]") {
    STRATA_REQUIRE_CUDA_GPU();
    TestGpu g;
    std::mt19937 rng(11);
    const int64_t rows[kDeviceLaunchProducts] = {6151, 1027, 2049};
    struct Case { DType type; int64_t n_cols, n_tok; };
    // Two and four warps a row at 2 rows a call; one warp a row (at most 2048 values) at 8 and 16.
    for (const auto& [type, n_cols, n_tok] : {Case{DType::Q4_0, 4096, 2}, Case{DType::Q6_K, 14336, 2},
                                              Case{DType::Q4_K, 2048, 8}, Case{DType::Q8_0, 1536, 16}}) {
        INFO(dtype_name(type) << ", " << n_cols << " columns, " << n_tok << " rows a call");
        const auto x = normal_floats(n_tok * n_cols, 12);
        DeviceBuffer dx = g.upload(x), dq = g.zeros(quantized_acts_bytes(n_tok, n_cols));
        quantize_acts(dx.as<float>(), n_tok, n_cols, true, dq.data(), g.stream);
        std::vector<std::vector<uint8_t>> w;
        std::vector<DeviceBuffer> dw, dy;
        std::array<WeightMatmul, kDeviceLaunchProducts> ms;
        for (int p = 0; p < kDeviceLaunchProducts; ++p) {
            w.push_back(strata::test::random_weights(type, rows[p], n_cols, rng));
            dw.push_back(g.upload(w[p]));
            dy.push_back(g.upload(nans(n_tok * rows[p])));
            ms[p] = {type, dw[p].data(), dx.as<float>(), dy[p].as<float>(), rows[p], n_cols, n_tok, rows[p], false, true, {}};
        }
        matvec(ms, dq.data(), g.stream);
        const auto acts = g.download<uint8_t>(dq, quantized_acts_bytes(n_tok, n_cols));
        std::vector<std::vector<float>> af(n_tok, std::vector<float>(n_cols));
        for (int64_t t = 0; t < n_tok; ++t)
            cpu::dequantize_act_ref(cpu::ActFormat::Q8x2, acts.data() + t * cpu::act_q8x2_bytes(n_cols), af[t].data(), n_cols);
        std::vector<float> wf(n_cols);
        std::vector<std::vector<float>> y;
        for (int p = 0; p < kDeviceLaunchProducts; ++p) {
            INFO("weight " << p);
            y.push_back(g.download<float>(dy[p], n_tok * rows[p]));
            int64_t bad = 0;
            for (int64_t r = 0; r < rows[p]; ++r) {
                const uint8_t* wr = w[p].data() + r * row_bytes(type, n_cols);
                cpu::dequantize_row_ref(type, wr, wf.data(), n_cols);
                for (int64_t t = 0; t < n_tok; ++t) {
                    const uint8_t* act = acts.data() + t * cpu::act_q8x2_bytes(n_cols);
                    double mag = 0;
                    for (int64_t k = 0; k < n_cols; ++k) mag += std::abs(double(wf[k]) * af[t][k]);
                    bad += !(std::abs(y[p][t * rows[p] + r] - cpu::vec_dot_ref(type, wr, act, n_cols)) <= 1e-5 * mag + 1e-6);
                }
            }
            CHECK(bad == 0);
        }
        // The last weight's first rows in a launch of their own: the same bits.
        WeightMatmul alone = ms[2];
        DeviceBuffer dy_alone = g.upload(nans(n_tok * kRows));
        alone.y = dy_alone.as<float>(), alone.n_rows = kRows, alone.ldy = kRows;
        matvec(std::span(&alone, 1), dq.data(), g.stream);
        const auto y_alone = g.download<float>(dy_alone, n_tok * kRows);
        for (int64_t t = 0; t < n_tok; ++t)
            CHECK(std::equal(y_alone.begin() + t * kRows, y_alone.begin() + (t + 1) * kRows, y[2].begin() + t * rows[2]));
    }
}

TEST_CASE("gpu matmul_tiles per weight type matches a double product of the half-rounded inputs", "[gpu]") {
    STRATA_REQUIRE_CUDA_GPU();
    TestGpu g;
    std::mt19937 rng(5);
    for (const DType type : kBlockTypes) {
        for (const int64_t n_tok : {int64_t{9}, int64_t{70}, int64_t{133}}) {
            INFO(dtype_name(type) << ", " << n_tok << " rows");
            const int64_t n_cols = 3 * 256;
            const auto w = strata::test::random_weights(type, kRows, n_cols, rng);
            const auto x = normal_floats(n_tok * n_cols, 6);
            DeviceBuffer dw = g.upload(w), dx = g.upload(x), dy = g.upload(nans(n_tok * kRows)), dh = g.zeros(n_tok * n_cols * 2);
            convert_f32_to_f16(dx.as<float>(), dh.as<uint16_t>(), n_tok * n_cols, g.stream);
            matmul_tiles({type, dw.data(), dx.as<float>(), dy.as<float>(), kRows, n_cols, n_tok, kRows}, dh.data(), g.stream);
            const auto y = g.download<float>(dy, n_tok * kRows);
            const auto wf = gpu::test::dequantize_ref(type, w, kRows, n_cols);
            // A dequantized value may round to the neighbouring half when the device fuses its
            // multiply-add: a few elements off by one half step.
            CHECK(off_double_product(y, wf, x, {kRows, n_cols, n_tok}, true, 2e-4, 1e-6) == 0);
        }
    }
}

TEST_CASE("gpu dequantize_rows_f16 per weight type writes the reference values rounded to half", "[gpu]") {
    STRATA_REQUIRE_CUDA_GPU();
    TestGpu g;
    std::mt19937 rng(7);
    for (const DType type : kBlockTypes) {
        INFO(dtype_name(type));
        const int64_t n_cols = 3 * 256;
        const auto w = strata::test::random_weights(type, kRows, n_cols, rng);
        DeviceBuffer dw = g.upload(w), dh = g.upload(std::vector<uint16_t>(kRows * n_cols, 0x7e00));  // half NaNs
        dequantize_rows_f16(type, dw.data(), kRows, n_cols, dh.as<uint16_t>(), g.stream);
        const auto got = g.download<uint16_t>(dh, kRows * n_cols);
        const auto wf = gpu::test::dequantize_ref(type, w, kRows, n_cols);
        int64_t bad = 0;
        for (int64_t i = 0; i < kRows * n_cols; ++i) {
            // A value the device computes with a fused multiply-add may round to the neighbouring half.
            const float ref = wf[i], half_step = std::max(std::abs(ref), 6.1e-5f) / 1024.0f;
            bad += !(std::abs(cpu::fp16_to_fp32(got[i]) - ref) <= half_step);
        }
        CHECK(bad == 0);
    }
}

TEST_CASE("gpu matmul past kExpandRows, over several expanded weight chunks, matches a double product", "[gpu]") {
    STRATA_REQUIRE_CUDA_GPU();
    TestGpu g;
    Cublas blas;
    std::mt19937 rng(9);
    // Wide rows make a chunk kExpandRowTile rows: 300 rows take three chunks, the last short.
    const int64_t n_cols = int64_t(kExpandBytes / 2 / uint64_t(kExpandRowTile)), n_rows = 300, n_tok = kExpandRows;
    REQUIRE(expand_chunk_rows(n_rows, n_cols) == kExpandRowTile);
    for (const DType type : {DType::Q4_0, DType::Q6_K}) {
        INFO(dtype_name(type));
        const auto w = strata::test::random_weights(type, n_rows, n_cols, rng);
        const auto x = normal_floats(n_tok * n_cols, 10);
        const auto y0 = normal_floats(n_tok * n_rows, 11);
        DeviceBuffer dw = g.upload(w), dx = g.upload(x), dy = g.upload(y0);
        WeightMatmul m{type, dw.data(), dx.as<float>(), dy.as<float>(), n_rows, n_cols, n_tok, n_rows};
        m.accumulate = true;
        REQUIRE(input_format(m) == InputFormat::F16);
        DeviceBuffer scratch = g.zeros(product_scratch_bytes(m));
        prepare_input(m.x, m.in, n_tok, n_cols, InputFormat::F16, scratch.data(), g.stream);
        matmul(std::span(&m, 1), scratch.data(), [&]() -> Cublas& { return blas; }, g.stream);
        const auto y = g.download<float>(dy, n_tok * n_rows);
        const auto wf = gpu::test::dequantize_ref(type, w, n_rows, n_cols);
        // Weights and activations rounded to half on the device: about 2^-11 of each product.
        CHECK(off_double_product(y, wf, x, {n_rows, n_cols, n_tok}, false, 1.5e-3, 1e-5, &y0) == 0);
    }
}

TEST_CASE("gpu copy_h2d from registered memory by kernel and from pageable memory lands every byte", "[gpu]") {
    STRATA_REQUIRE_CUDA_GPU();
    TestGpu g;
    REQUIRE(install_cuda_host_pinner());
    const size_t bytes = 16 << 10;
    // A registered range, page-aligned as a pinned pool's slot is.
    const std::unique_ptr<uint8_t, decltype(&std::free)> held(static_cast<uint8_t*>(std::aligned_alloc(4096, 1 << 20)), &std::free);
    const std::span<uint8_t> page(held.get(), 1 << 20);
    for (size_t i = 0; i < page.size(); ++i) page[i] = uint8_t(i * 7 + 3);
    REQUIRE(storage::host_pinner()->register_memory(page.data(), page.size()).empty());
    CHECK(host_mapped(page.data() + 4096, bytes));
    CHECK_FALSE(host_mapped(page.data() + page.size() - 16, 32));  // runs past the range
    std::vector<uint8_t> pageable(page.begin(), page.begin() + bytes + 1);
    for (const auto& [src, n] : {std::pair{page.data() + 4096, bytes}, std::pair{page.data() + 4096, bytes - 16},
                                 std::pair{page.data() + 4097, bytes}, std::pair{pageable.data(), bytes + 1}}) {
        INFO(n << " bytes, " << (src == pageable.data() ? "pageable" : "registered"));
        DeviceBuffer d = g.upload(std::vector<uint8_t>(n, 0xEE));
        copy_h2d(d.data(), src, n, g.stream);
        const auto got = g.download<uint8_t>(d, n);
        CHECK(std::memcmp(got.data(), src, n) == 0);
    }
    storage::host_pinner()->unregister_memory(page.data(), page.size());
    CHECK_FALSE(host_mapped(page.data() + 4096, bytes));
}

TEST_CASE("gpu kv_store writes cpu::store_kv_row's bytes for every KV type", "[gpu]") {
    STRATA_REQUIRE_CUDA_GPU();
    TestGpu g;
    const int64_t n = 4 * 32, n_tok = 5;
    auto src = normal_floats(n_tok * n, 8);
    for (int j = 0; j < 32; ++j) src[j] = 0.0f;   // a zero block
    src[40] = 3.0f, src[41] = -3.0f;              // ties for Q4_0's largest magnitude
    for (const DType type : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0}) {
        INFO(dtype_name(type));
        const int64_t stride = int64_t(row_bytes(type, n)) + 32;  // padded rows
        std::vector<int32_t> block(n_tok, 0), row(n_tok);
        for (int64_t t = 0; t < n_tok; ++t) row[t] = int32_t(n_tok - 1 - t);
        DeviceBuffer cache = g.zeros(kKvBlockSize * stride), dsrc = g.upload(src), db = g.upload(block), dr = g.upload(row);
        kv_store(dsrc.as<float>(), {cache.data(), type, db.as<int32_t>(), dr.as<int32_t>(), n_tok, n, stride, kKvBlockSize * stride},
                 g.stream);
        const auto got = g.download<uint8_t>(cache, kKvBlockSize * stride);
        std::vector<uint8_t> want(row_bytes(type, n));
        for (int64_t t = 0; t < n_tok; ++t) {
            cpu::store_kv_row(type, src.data() + t * n, want.data(), n);
            CHECK(std::memcmp(got.data() + row[t] * stride, want.data(), want.size()) == 0);
        }
    }
}
