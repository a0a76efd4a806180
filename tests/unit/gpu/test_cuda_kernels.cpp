// Every CUDA kernel against the CPU scalar reference, on random inputs with odd sizes (row counts
// that are not a multiple of the warps per block, more blocks per row than lanes per warp).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "cpu/attention_cpu.h"
#include "cpu/kv_format.h"
#include "cpu/norm_rope_act.h"
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

TEST_CASE("gpu rms_norm, swiglu and add match cpu::rms_norm, cpu::swiglu and cpu::add", "[gpu]") {
    STRATA_REQUIRE_CUDA_GPU();
    TestGpu g;
    const int64_t rows = 3, n = 1001;
    const auto x = normal_floats(rows * n, 41), w = normal_floats(n, 42), up = normal_floats(rows * n, 43);
    DeviceBuffer dx = g.upload(x), dw = g.upload(w), dup = g.upload(up), dy = g.zeros(rows * n * 4);

    rms_norm(dx.as<float>(), dw.as<float>(), dy.as<float>(), rows, n, 1e-5f, g.stream);
    auto y = g.download<float>(dy, rows * n);
    std::vector<float> ref(rows * n);
    for (int64_t r = 0; r < rows; ++r) cpu::rms_norm(x.data() + r * n, w.data(), ref.data() + r * n, n, 1e-5f);
    for (size_t i = 0; i < ref.size(); ++i) CHECK(y[i] == Approx(ref[i]).epsilon(1e-5).margin(1e-6));

    swiglu(dx.as<float>(), dup.as<float>(), rows * n, g.stream);
    y = g.download<float>(dx, rows * n);
    ref = x;
    cpu::swiglu(ref.data(), up.data(), rows * n);
    for (size_t i = 0; i < ref.size(); ++i) CHECK(y[i] == Approx(ref[i]).epsilon(1e-5).margin(1e-6));

    add(dx.as<float>(), dup.as<float>(), rows * n, g.stream);  // on the swiglu output
    const auto sum = g.download<float>(dx, rows * n);
    int64_t bad = 0;
    for (size_t i = 0; i < sum.size(); ++i) bad += sum[i] != y[i] + up[i];  // one float add: exact
    CHECK(bad == 0);
}

TEST_CASE("gpu rope matches cpu::rope (normal and NeoX, partial rotation, freq factors)", "[gpu]") {
    STRATA_REQUIRE_CUDA_GPU();
    TestGpu g;
    const int32_t n_heads = 5, head_dim = 48, n_rot = 32;
    const std::vector<int32_t> pos = {0, 7, 4099};
    const auto factors = [] {
        std::vector<float> f(16);
        for (int i = 0; i < 16; ++i) f[i] = 1.0f + 0.25f * i;
        return f;
    }();
    DeviceBuffer dpos = g.upload(pos), dfac = g.upload(factors);
    for (bool neox : {false, true})
        for (bool with_factors : {false, true}) {
            INFO("neox " << neox << ", freq factors " << with_factors);
            const auto x = normal_floats(pos.size() * n_heads * head_dim, 51);
            DeviceBuffer dx = g.upload(x);
            RopeArgs a{n_heads, head_dim, n_rot, 500000.0f, 0.5f, neox, with_factors ? dfac.as<float>() : nullptr};
            rope(dx.as<float>(), dpos.as<int32_t>(), static_cast<int64_t>(pos.size()), a, g.stream);
            const auto y = g.download<float>(dx, x.size());
            auto ref = x;
            const cpu::RopeParams p{head_dim, n_rot, 500000.0f, 0.5f, neox, with_factors ? factors.data() : nullptr};
            for (size_t t = 0; t < pos.size(); ++t) cpu::rope(ref.data() + t * n_heads * head_dim, n_heads, pos[t], p);
            for (size_t i = 0; i < ref.size(); ++i) CHECK(y[i] == Approx(ref[i]).margin(1e-5));
        }
}

TEST_CASE("gpu decode attention over a paged KV cache matches cpu::attention", "[gpu]") {
    STRATA_REQUIRE_CUDA_GPU();
    TestGpu g;
    // 3 sequences: 1 key, 37 keys (3 blocks, one split) and 300 keys (19 blocks, 3 splits, the
    // last partial); GQA with 3 query heads per KV head; head_dim not a multiple of 32.
    const std::vector<int32_t> n_kv = {1, 37, 300};
    const int32_t n_seq = 3, n_head = 6, n_head_kv = 2, head_dim = 40, bs = kKvBlockSize;
    const int32_t max_blocks = (300 + bs - 1) / bs;
    const int64_t kv_stride = int64_t{n_head_kv} * head_dim, block_stride = bs * kv_stride;
    // Blocks handed out in a shuffled order, as a block pool would after some churn.
    int32_t n_blocks = 0;
    for (int32_t n : n_kv) n_blocks += (n + bs - 1) / bs;
    n_blocks += 4;  // unused blocks in between
    std::vector<int32_t> order(n_blocks);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937(61));
    std::vector<int32_t> tables(n_seq * max_blocks, -1);
    int32_t next = 0;
    for (int32_t s = 0; s < n_seq; ++s)
        for (int32_t b = 0; b < (n_kv[s] + bs - 1) / bs; ++b) tables[s * max_blocks + b] = order[next++];
    std::replace(tables.begin(), tables.end(), -1, 0);  // unused entries: any valid block

    const auto k = normal_floats(n_blocks * block_stride, 62), v = normal_floats(n_blocks * block_stride, 63);
    const auto q = normal_floats(n_seq * n_head * head_dim, 64, 2.0f);  // peaky softmax
    DeviceBuffer dk = g.upload(k), dv = g.upload(v), dq = g.upload(q), dt = g.upload(tables), dn = g.upload(n_kv);
    DeviceBuffer dout = g.zeros(q.size() * 4);
    DeviceBuffer scratch = g.zeros(decode_attention_scratch_floats(n_seq, n_head, head_dim, max_blocks) * 4);
    CudaAttentionArgs a;
    a.q = dq.as<float>();
    a.out = dout.as<float>();
    a.k = dk.as<float>();
    a.v = dv.as<float>();
    a.block_tables = dt.as<int32_t>();
    a.n_kv = dn.as<int32_t>();
    a.n_seq = n_seq;
    a.max_blocks = max_blocks;
    a.n_head = n_head;
    a.n_head_kv = n_head_kv;
    a.head_dim = head_dim;
    a.kv_stride = kv_stride;
    a.block_stride = block_stride;
    a.scratch = scratch.as<float>();
    decode_attention(a, g.stream);
    const auto out = g.download<float>(dout, q.size());

    std::vector<float> ref(q.size());
    for (int32_t s = 0; s < n_seq; ++s) {
        cpu::AttentionArgs c;
        c.q = q.data() + s * n_head * head_dim;
        c.out = ref.data() + s * n_head * head_dim;
        c.k = k.data();
        c.v = v.data();
        c.n_tokens = 1;
        c.pos0 = n_kv[s] - 1;
        c.n_head = n_head;
        c.n_head_kv = n_head_kv;
        c.head_dim = head_dim;
        c.kv_stride = kv_stride * sizeof(float);  // bytes
        c.block_table = tables.data() + s * max_blocks;
        c.block_size = bs;
        c.block_stride = block_stride * sizeof(float);
        cpu::attention(c);
    }
    for (size_t i = 0; i < ref.size(); ++i) {
        INFO("sequence " << i / (n_head * head_dim) << ", head " << i / head_dim % n_head);
        CHECK(out[i] == Approx(ref[i]).epsilon(1e-4).margin(1e-5));
    }
}

TEST_CASE("gpu kv_store then kv_gather gives each row as the CPU cache rounds it", "[gpu]") {
    STRATA_REQUIRE_CUDA_GPU();
    TestGpu g;
    const int64_t n = 72, n_tok = 19, kv_stride = n, block_stride = kKvBlockSize * n, n_blocks = 3;
    const auto src = normal_floats(size_t(n_tok * n), 21);
    std::vector<int32_t> block(n_tok), row(n_tok);
    for (int64_t t = 0; t < n_tok; ++t) {  // distinct rows of blocks 1 and 0, out of order
        block[t] = int32_t((2 * (t / kKvBlockSize) + 1) % n_blocks);
        row[t] = int32_t((7 * t) % kKvBlockSize);
    }
    for (const DType type : {DType::F32, DType::F16, DType::BF16}) {
        INFO(dtype_name(type));
        DeviceBuffer cache = g.zeros(size_t(n_blocks * block_stride) * 4);
        DeviceBuffer dsrc = g.upload(src), db = g.upload(block), dr = g.upload(row), out = g.zeros(src.size() * 4);
        kv_store(dsrc.as<float>(), cache.data(), type, db.as<int32_t>(), dr.as<int32_t>(), n_tok, n, kv_stride, block_stride,
                 g.stream);
        kv_gather(cache.data(), type, db.as<int32_t>(), dr.as<int32_t>(), n_tok, n, kv_stride, block_stride,
                  out.as<float>(), g.stream);
        const auto got = g.download<float>(out, src.size());
        std::vector<uint8_t> bytes(row_bytes(type, n));
        std::vector<float> want(n);
        for (int64_t t = 0; t < n_tok; ++t) {
            cpu::store_kv_row(type, &src[t * n], bytes.data(), n);
            cpu::load_kv_values(type, bytes.data(), 0, want.data(), n);
            for (int64_t i = 0; i < n; ++i) CHECK(got[t * n + i] == want[i]);
        }
    }
}
