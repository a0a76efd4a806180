// The device interface's contract, on every device (the simulated one always, CUDA where there
// is a GPU): ops against the CPU scalar references, byte-strided KV rows, paged attention,
// stream and event ordering, the memory budget; and the simulated device's throttled link.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <numeric>
#include <random>
#include <span>
#include <vector>

#include "core/error.h"
#include "cpu/attention_cpu.h"
#include "cpu/kv_format.h"
#include "cpu/norm_rope_act.h"
#include "gpu/device.h"
#include "tests/support/random_values.h"
#include "tests/support/random_weights.h"
#include "tests/unit/gpu/device_test_support.h"
#include "tests/unit/gpu/reference_weights.h"

using namespace strata;
using namespace strata::gpu;
using strata::gpu::test::TestDevice;
using strata::test::normal_floats;
using Catch::Matchers::Contains;

namespace {

// The largest |w| * |x| sum of a row and the double-precision product.
struct RowRef {
    double value = 0, magnitude = 0;
};
RowRef row_ref(const std::vector<float>& w, const float* x, int64_t r, int64_t n_cols) {
    RowRef ref;
    for (int64_t k = 0; k < n_cols; ++k) {
        ref.value += double(w[r * n_cols + k]) * x[k];
        ref.magnitude += std::abs(double(w[r * n_cols + k]) * x[k]);
    }
    return ref;
}

// Every weight type the device takes, at decode sizes (1 to kRowWiseRows rows: each row as it
// is alone) and longer (the tiled and cuBLAS kernels), written and accumulated, against double
// products of the reference dequantization. The device was never asked to reserve matmul
// scratch: products of any size must work regardless.
void matmul_rows(TestDevice& d) {
    const int64_t n_rows = 37;  // not a multiple of any kernel's row tile
    const DType types[] = {DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                           DType::Q8_0, DType::IQ4_NL, DType::MXFP4, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K,
                           DType::Q6_K, DType::Q8_K, DType::IQ4_XS};
    std::mt19937 rng(11);
    for (DType type : types) {
        if (!d.dev->supports_weight(type)) continue;
        const int64_t block = traits(type).block_elems;
        // Odd float widths (no 16-byte loads), 40 chunks of 32 (one warp a row) and 4096 (four).
        for (const int64_t n_cols : {block == 1 ? int64_t{333} : 5 * 256, int64_t{4096}}) {
            INFO(d.dev->name() << ", " << dtype_name(type) << ", " << n_cols << " columns");
            const auto w = strata::test::random_weights(type, n_rows, n_cols, rng);
            const auto wf = gpu::test::dequantize_ref(type, w, n_rows, n_cols);
            DeviceBuffer dw = d.upload(w);
            for (int64_t n_tok : {int64_t{1}, int64_t{3}, Device::kRowWiseRows, Device::kRowWiseRows + 3, int64_t{70}}) {
                INFO(n_tok << " rows");
                const auto x = normal_floats(n_tok * n_cols, 12);
                const auto y0 = normal_floats(n_tok * n_rows, 13);
                DeviceBuffer dx = d.upload(x), dy = d.zeros(n_tok * n_rows * 4), dacc = d.upload(y0);
                d.dev->matmul({type, dw.data(), dx.as<float>(), dy.as<float>(), n_rows, n_cols, n_tok}, *d.stream);
                d.dev->matmul({type, dw.data(), dx.as<float>(), dacc.as<float>(), n_rows, n_cols, n_tok, true}, *d.stream);
                const auto y = d.download<float>(dy, n_tok * n_rows), acc = d.download<float>(dacc, n_tok * n_rows);
                // Decode rows within the activation quantization (Q8x2: about 2^-16 of a block's
                // largest value); longer products may round weights and activations to half.
                const double rel = n_tok > Device::kRowWiseRows ? 2e-3 : 4e-4;
                int64_t bad = 0;
                for (int64_t t = 0; t < n_tok; ++t)
                    for (int64_t r = 0; r < n_rows; ++r) {
                        const RowRef ref = row_ref(wf, x.data() + t * n_cols, r, n_cols);
                        const double tol = rel * ref.magnitude + 1e-5;
                        bad += !(std::abs(y[t * n_rows + r] - ref.value) <= tol);
                        bad += !(std::abs(acc[t * n_rows + r] - (ref.value + y0[t * n_rows + r])) <= tol + 1e-5);
                    }
                CHECK(bad == 0);
                if (n_tok == 1 || n_tok > Device::kRowWiseRows) continue;
                // Row-wise: each row as a product of that row alone gives it.
                for (int64_t t = 0; t < n_tok; ++t) {
                    DeviceBuffer one = d.zeros(n_rows * 4);
                    d.dev->matmul({type, dw.data(), dx.as<float>() + t * n_cols, one.as<float>(), n_rows, n_cols, 1}, *d.stream);
                    const auto alone = d.download<float>(one, n_rows);
                    CHECK(std::equal(alone.begin(), alone.end(), y.begin() + t * n_rows));
                }
            }
        }
    }
}

// A group of products of one input (q, k and v: unequal row counts, the last accumulated), the
// input as it is or transformed on the way in (RMSNorm, SwiGLU): each weight gets what its own
// matmul gives, bit for bit, and that is the double product of the transformed rows. Groups of
// one type (one launch of each kernel: tiles of every block type, float rows) and of two (two launches).
void grouped_products(TestDevice& d) {
    constexpr int64_t rows[3] = {37, 8, 13};
    struct Group {
        std::array<DType, 3> types;
        int64_t n_cols;
    };
    const Group groups[] = {{{DType::Q4_K, DType::Q4_K, DType::Q4_K}, 512},  {{DType::Q6_K, DType::Q6_K, DType::Q6_K}, 512},
                            {{DType::Q8_0, DType::Q8_0, DType::Q8_0}, 544},  {{DType::F16, DType::F16, DType::F16}, 512},
                            {{DType::Q4_0, DType::Q4_0, DType::Q6_K}, 4096}};
    std::mt19937 rng(81);
    for (const Group& g : groups) {
        const int64_t n_cols = g.n_cols;
        const auto nw = normal_floats(n_cols, 82);
        DeviceBuffer dnw = d.upload(nw);
        std::vector<std::vector<float>> wf;
        std::vector<DeviceBuffer> dw;
        for (size_t i = 0; i < 3; ++i) {
            const auto w = strata::test::random_weights(g.types[i], rows[i], n_cols, rng);
            wf.push_back(gpu::test::dequantize_ref(g.types[i], w, rows[i], n_cols));
            dw.push_back(d.upload(w));
        }
        for (const int64_t n_tok : {int64_t{1}, int64_t{5}, Device::kRowWiseRows, int64_t{40}}) {
            const auto x = normal_floats(n_tok * n_cols, 83), up = normal_floats(n_tok * n_cols, 84);
            const auto y0 = normal_floats(n_tok * rows[2], 85);
            DeviceBuffer dx = d.upload(x), dup = d.upload(up);
            for (const int transform : {0, 1, 2}) {
                INFO(d.dev->name() << ", " << dtype_name(g.types[0]) << " and " << dtype_name(g.types[2]) << ", " << n_tok
                                   << " rows, " << (transform == 0 ? "plain" : transform == 1 ? "RMSNorm" : "SwiGLU"));
                std::vector<DeviceBuffer> grouped, alone;
                std::array<MatmulArgs, 3> parts;
                for (size_t i = 0; i < 3; ++i) {
                    grouped.push_back(i == 2 ? d.upload(y0) : d.zeros(n_tok * rows[i] * 4));
                    alone.push_back(i == 2 ? d.upload(y0) : d.zeros(n_tok * rows[i] * 4));
                    parts[i] = {g.types[i], dw[i].data(), dx.as<float>(), grouped[i].as<float>(), rows[i], n_cols, n_tok, i == 2};
                    if (transform == 1) parts[i].norm_w = dnw.as<float>(), parts[i].norm_eps = 1e-5f;
                    if (transform == 2) parts[i].swiglu_up = dup.as<float>();
                }
                d.dev->matmul_group(parts, *d.stream);
                for (size_t i = 0; i < 3; ++i) {
                    MatmulArgs own = parts[i];
                    own.y = alone[i].as<float>();
                    d.dev->matmul(own, *d.stream);
                }
                std::vector<float> fx(x.size());
                for (int64_t t = 0; t < n_tok; ++t) {
                    std::copy_n(&x[t * n_cols], n_cols, &fx[t * n_cols]);
                    if (transform == 1) cpu::rms_norm(&x[t * n_cols], nw.data(), &fx[t * n_cols], n_cols, 1e-5f);
                    if (transform == 2) cpu::swiglu(&fx[t * n_cols], &up[t * n_cols], n_cols);
                }
                const double rel = n_tok > Device::kRowWiseRows ? 2e-3 : 4e-4;
                for (size_t i = 0; i < 3; ++i) {
                    INFO("product " << i);
                    const auto y = d.download<float>(grouped[i], n_tok * rows[i]);
                    CHECK(y == d.download<float>(alone[i], n_tok * rows[i]));
                    int64_t bad = 0;
                    for (int64_t t = 0; t < n_tok; ++t)
                        for (int64_t r = 0; r < rows[i]; ++r) {
                            const RowRef ref = row_ref(wf[i], fx.data() + t * n_cols, r, n_cols);
                            const double want = ref.value + (i == 2 ? y0[t * rows[i] + r] : 0.0);
                            bad += !(std::abs(y[t * rows[i] + r] - want) <= rel * ref.magnitude + 1e-4);
                        }
                    CHECK(bad == 0);
                }
            }
        }
    }
}

// A group's edges, each product against its own matmul, bit for bit: four products of one type
// (three in a launch, the first of them empty, then one more), and a float weight on the plain
// input before a quantized one, right after another group quantized other values at the same
// address (the second launch must quantize this group's input, not reuse what the scratch holds).
void group_edges(TestDevice& d) {
    const int64_t n_cols = 256;
    std::mt19937 rng(86);
    auto check = [&](std::span<const DType> types, std::span<const int64_t> rows, const DeviceBuffer& dx, int64_t n_tok) {
        std::vector<DeviceBuffer> dw, grouped, alone;
        std::vector<MatmulArgs> parts;
        for (size_t i = 0; i < types.size(); ++i) {
            dw.push_back(d.upload(strata::test::random_weights(types[i], rows[i], n_cols, rng)));
            grouped.push_back(d.zeros(std::max<int64_t>(1, n_tok * rows[i]) * 4));
            alone.push_back(d.zeros(std::max<int64_t>(1, n_tok * rows[i]) * 4));
            parts.push_back({types[i], dw[i].data(), dx.as<float>(), grouped[i].as<float>(), rows[i], n_cols, n_tok});
        }
        d.dev->matmul_group(parts, *d.stream);
        for (size_t i = 0; i < parts.size(); ++i) {
            MatmulArgs own = parts[i];
            own.y = alone[i].as<float>();
            d.dev->matmul(own, *d.stream);
            INFO(d.dev->name() << ", product " << i << " of " << parts.size() << ", " << dtype_name(types[i]));
            CHECK(d.download<float>(grouped[i], n_tok * rows[i]) == d.download<float>(alone[i], n_tok * rows[i]));
        }
    };
    const int64_t n_tok = 3;
    DeviceBuffer dx = d.upload(normal_floats(n_tok * n_cols, 87));
    const DType four[] = {DType::Q4_0, DType::Q4_0, DType::Q4_0, DType::Q4_0};
    const int64_t four_rows[] = {0, 9, 16, 5};
    check(four, four_rows, dx, n_tok);

    const DType quantized[] = {DType::Q8_0};
    const DType float_first[] = {DType::F16, DType::Q8_0};
    const int64_t rows[] = {7, 11};
    check(quantized, rows, dx, n_tok);
    const auto other = normal_floats(n_tok * n_cols, 88);
    d.dev->copy_h2d(dx.data(), other.data(), other.size() * 4, *d.stream);
    check(float_first, rows, dx, n_tok);
    d.stream->synchronize();
}

// The element-wise ops in double, from their definitions: RMSNorm, SiLU(gate) x up, and
// gpt-oss's clamped form (gate clamped above, up either way, sigmoid(alpha x gate), up + 1).
std::vector<double> rms_norm_ref(std::span<const float> x, std::span<const float> w, int64_t n, double eps) {
    std::vector<double> y(x.size());
    for (size_t r = 0; r < x.size() / size_t(n); ++r) {
        double ss = 0;
        for (int64_t i = 0; i < n; ++i) ss += double(x[r * n + i]) * x[r * n + i];
        const double scale = 1.0 / std::sqrt(ss / double(n) + eps);
        for (int64_t i = 0; i < n; ++i) y[r * n + i] = double(x[r * n + i]) * scale * w[i];
    }
    return y;
}
double swiglu_ref(double gate, double up) { return gate / (1.0 + std::exp(-gate)) * up; }
double swiglu_clamped_ref(double gate, double up, double alpha, double limit) {
    const double g = std::min(gate, limit), u = std::clamp(up, -limit, limit);
    return g / (1.0 + std::exp(-alpha * g)) * (u + 1.0);
}

void elementwise_ops(TestDevice& d) {
    const int64_t rows = 3, n = 1001;
    const auto x = normal_floats(rows * n, 41), w = normal_floats(n, 42), up = normal_floats(rows * n, 43),
               b = normal_floats(n, 44);
    DeviceBuffer dx = d.upload(x), dw = d.upload(w), dup = d.upload(up), db = d.upload(b), dy = d.zeros(rows * n * 4);
    Stream& s = *d.stream;

    d.dev->rms_norm(dx.as<float>(), dw.as<float>(), dy.as<float>(), rows, n, 1e-5f, s);
    auto y = d.download<float>(dy, rows * n);
    const std::vector<double> normed = rms_norm_ref(x, w, n, 1e-5);
    for (size_t i = 0; i < normed.size(); ++i) CHECK(y[i] == Approx(normed[i]).epsilon(1e-5).margin(1e-6));
    // And the CPU's very bits: its squares summed in double, whatever the order, give its scale.
    std::vector<float> cpu_normed(rows * n);
    for (int64_t r = 0; r < rows; ++r) cpu::rms_norm(x.data() + r * n, w.data(), cpu_normed.data() + r * n, n, 1e-5f);
    CHECK(y == cpu_normed);

    d.dev->swiglu(dx.as<float>(), dup.as<float>(), rows, n, s);
    y = d.download<float>(dx, rows * n);
    for (size_t i = 0; i < y.size(); ++i) CHECK(y[i] == Approx(swiglu_ref(x[i], up[i])).epsilon(1e-5).margin(1e-6));

    d.dev->add(dx.as<float>(), dup.as<float>(), rows * n, s);  // on the swiglu output
    d.dev->add_rows(dx.as<float>(), db.as<float>(), rows, n, s);
    const auto sum = d.download<float>(dx, rows * n);
    int64_t bad = 0;  // two float adds in a fixed order: exact
    for (int64_t i = 0; i < rows * n; ++i) bad += sum[i] != (y[i] + up[i]) + b[i % n];
    CHECK(bad == 0);
}

// gpt-oss's clamped SwiGLU against its definition, and rows copied between strided layouts (MLA's
// per-head products) against a plain loop.
void clamped_glu_rows(TestDevice& d) {
    const int64_t rows = 3, n = 1001;
    auto x = normal_floats(rows * n, 61), up = normal_floats(rows * n, 62);
    for (float& v : x) v *= 6.0f;  // past the clamp of 7 either way
    for (float& v : up) v *= 6.0f;
    DeviceBuffer dx = d.upload(x), dup = d.upload(up);
    d.dev->swiglu_clamped(dx.as<float>(), dup.as<float>(), rows, n, 1.702f, 7.0f, *d.stream);
    const auto y = d.download<float>(dx, rows * n);
    for (size_t i = 0; i < y.size(); ++i)
        CHECK(y[i] == Approx(swiglu_clamped_ref(x[i], up[i], 1.702, 7.0)).epsilon(1e-5).margin(1e-6));

    // Columns [5, 5 + 40) of rows of 100 into rows of 64 at column 7.
    const auto src = normal_floats(rows * 100, 63);
    DeviceBuffer dsrc = d.upload(src), ddst = d.zeros(rows * 64 * 4);
    d.dev->copy_rows(ddst.as<float>() + 7, 64, dsrc.as<float>() + 5, 100, rows, 40, *d.stream);
    const auto got = d.download<float>(ddst, rows * 64);
    std::vector<float> want(rows * 64, 0.0f);
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < 40; ++c) want[r * 64 + 7 + c] = src[r * 100 + 5 + c];
    CHECK(got == want);
}

// Plain, with frequency factors, with YaRN (deepseek2, gpt-oss), and heads that start 8 values
// into rows of 248 (MLA rotates the RoPE part at the end of its rows): the values outside the
// heads stay as they were.
void rope_op(TestDevice& d) {
    const int32_t n_heads = 5, head_dim = 48, n_rot = 32;
    const int64_t offset = 8, row_width = n_heads * head_dim + offset;
    const std::vector<int32_t> pos = {0, 7, 4099};
    std::vector<float> factors(16);
    for (int i = 0; i < 16; ++i) factors[i] = 1.0f + 0.25f * i;
    DeviceBuffer dpos = d.upload(pos), dfac = d.upload(factors);
    const cpu::YarnRamp ramp = cpu::yarn_ramp(n_rot, 4096, 150000.0f, 32.0f, 1.0f);
    for (bool neox : {false, true})
        for (bool with_factors : {false, true})
            for (bool yarn : {false, true})
                for (bool wide : {false, true}) {
                    INFO("neox " << neox << ", freq factors " << with_factors << ", YaRN " << yarn << ", wider rows " << wide);
                    const int64_t width = wide ? row_width : n_heads * head_dim, at = wide ? offset : 0;
                    const auto x = normal_floats(pos.size() * width, 51);
                    DeviceBuffer dx = d.upload(x);
                    RopeArgs a{n_heads, head_dim, n_rot, 500000.0f, 0.5f, neox, with_factors ? dfac.as<float>() : nullptr};
                    cpu::RopeParams p{head_dim, n_rot, 500000.0f, 0.5f, neox, with_factors ? factors.data() : nullptr};
                    if (yarn) {
                        a.freq_base = p.freq_base = 150000.0f;
                        a.freq_scale = p.freq_scale = 1.0f / 32;
                        a.attn_factor = p.attn_factor = 1.3466f;
                        a.ext_factor = p.ext_factor = 1.0f;
                        a.yarn_low = p.yarn_low = ramp.low;
                        a.yarn_high = p.yarn_high = ramp.high;
                    }
                    if (wide) a.row_width = row_width;
                    d.dev->rope(dx.as<float>() + at, dpos.as<int32_t>(), static_cast<int64_t>(pos.size()), a, *d.stream);
                    const auto y = d.download<float>(dx, x.size());
                    auto ref = x;
                    for (size_t t = 0; t < pos.size(); ++t) cpu::rope(ref.data() + t * width + at, n_heads, pos[t], p);
                    for (size_t i = 0; i < ref.size(); ++i) CHECK(y[i] == Approx(ref[i]).margin(1e-5));
                }
}

void kv_rows(TestDevice& d) {
    const int64_t n = 96, n_tok = 19, n_blocks = 3;
    const auto src = normal_floats(size_t(n_tok * n), 21);
    std::vector<int32_t> block(n_tok), row(n_tok);
    for (int64_t t = 0; t < n_tok; ++t) {  // distinct rows of blocks 1 and 0, out of order
        block[t] = int32_t((2 * (t / kKvBlockSize) + 1) % n_blocks);
        row[t] = int32_t((7 * t) % kKvBlockSize);
    }
    for (const DType type : {DType::F32, DType::F16, DType::BF16, DType::Q8_0}) {
        if (!d.dev->supports_kv(type)) continue;
        INFO(dtype_name(type));
        const int64_t row_stride = int64_t(row_bytes(type, n)) + 64;  // padded rows: strides are bytes
        const int64_t block_stride = kKvBlockSize * row_stride;
        DeviceBuffer cache = d.zeros(size_t(n_blocks * block_stride));
        DeviceBuffer dsrc = d.upload(src), db = d.upload(block), dr = d.upload(row), out = d.zeros(src.size() * 4);
        const KvRows rows{cache.data(), type, db.as<int32_t>(), dr.as<int32_t>(), n_tok, n, row_stride, block_stride};
        d.dev->kv_store(dsrc.as<float>(), rows, *d.stream);
        d.dev->kv_gather(rows, out.as<float>(), *d.stream);
        const auto got = d.download<float>(out, src.size());
        std::vector<uint8_t> bytes(row_bytes(type, n));
        std::vector<float> want(n);
        int64_t bad = 0;
        for (int64_t t = 0; t < n_tok; ++t) {
            cpu::store_kv_row(type, &src[t * n], bytes.data(), n);
            cpu::load_kv_values(type, bytes.data(), 0, want.data(), n);
            for (int64_t i = 0; i < n; ++i) bad += got[t * n + i] != want[i];
        }
        CHECK(bad == 0);
    }
}

// A layer's queries, keys and values in one op: the queries rotated in place as rope rotates
// them, the cache holding the bytes kv_store writes for the keys after rope and for the values,
// the key and value rows left as they were; with keys alone, with queries, with queries and
// values, and without a key cache (queries and keys rotated in place), for every KV type and both pairings (rope_op and kv_rows check rope and kv_store
// against the CPU). Two query heads a KV head, so the op's parts differ in size; rows of 192
// values, so that a key or value row takes two of the op's thread blocks, the second partly idle.
void rope_qkv_rows(TestDevice& d) {
    const int32_t n_heads = 3, n_q_heads = 6, head_dim = 64, n_rot = 32;
    const int64_t n = n_heads * head_dim;
    const std::vector<int32_t> pos = {3, 0, 4099, 17, 18};
    const auto n_tok = static_cast<int64_t>(pos.size());
    std::vector<int32_t> block(pos.size(), 0), row(pos.size());
    for (int64_t t = 0; t < n_tok; ++t) row[t] = int32_t(n_tok - 1 - t);
    const auto keys = normal_floats(size_t(n_tok * n), 33), values = normal_floats(size_t(n_tok * n), 34);
    const auto queries = normal_floats(size_t(n_tok * n_q_heads * head_dim), 35);
    DeviceBuffer dpos = d.upload(pos), db = d.upload(block), dr = d.upload(row);
    for (const DType type : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0})
        for (bool neox : {false, true})
            for (const bool with_queries : {false, true})
                for (const bool with_values : {false, true}) {
                    if (!d.dev->supports_kv(type)) continue;
                    INFO(dtype_name(type) << ", neox " << neox << ", queries " << with_queries << ", values " << with_values);
                    const RopeArgs a{n_heads, head_dim, n_rot, 10000.0f, 1.0f, neox}, qa{n_q_heads, head_dim, n_rot, 10000.0f, 1.0f, neox};
                    const int64_t stride = int64_t(row_bytes(type, n));
                    const size_t bytes = size_t(kKvBlockSize * stride);
                    DeviceBuffer rotated = d.upload(keys), dk = d.upload(keys), dv = d.upload(values);
                    DeviceBuffer q_apart = d.upload(queries), dq = d.upload(queries);
                    DeviceBuffer k_apart = d.zeros(bytes), v_apart = d.zeros(bytes), k_one = d.zeros(bytes), v_one = d.zeros(bytes);
                    auto rows = [&](DeviceBuffer& cache) {
                        return KvRows{cache.data(), type, db.as<int32_t>(), dr.as<int32_t>(), n_tok, n, stride, kKvBlockSize * stride};
                    };
                    d.dev->rope(rotated.as<float>(), dpos.as<int32_t>(), n_tok, a, *d.stream);
                    d.dev->kv_store(rotated.as<float>(), rows(k_apart), *d.stream);
                    if (with_values) d.dev->kv_store(dv.as<float>(), rows(v_apart), *d.stream);
                    if (with_queries) d.dev->rope(q_apart.as<float>(), dpos.as<int32_t>(), n_tok, qa, *d.stream);
                    d.dev->rope_qkv_store({.q = with_queries ? dq.as<float>() : nullptr,
                                           .q_rope = qa,
                                           .k = dk.as<float>(),
                                           .k_rope = a,
                                           .k_rows = rows(k_one),
                                           .v = with_values ? dv.as<float>() : nullptr,
                                           .v_rows = rows(v_one),
                                           .pos = dpos.as<int32_t>()},
                                          *d.stream);
                    CHECK(d.download<uint8_t>(k_one, bytes) == d.download<uint8_t>(k_apart, bytes));
                    CHECK(d.download<uint8_t>(v_one, bytes) == d.download<uint8_t>(v_apart, bytes));
                    CHECK(d.download<float>(dq, queries.size()) == d.download<float>(q_apart, queries.size()));
                    if (with_queries) CHECK(d.download<float>(dq, queries.size()) != queries);
                    CHECK(d.download<float>(dk, keys.size()) == keys);
                    CHECK(d.download<float>(dv, values.size()) == values);
                }
    // Without a key cache (the host holds the KV cache): queries and keys rotated in place, as rope rotates them.
    for (bool neox : {false, true}) {
        INFO("no key cache, neox " << neox);
        const RopeArgs a{n_heads, head_dim, n_rot, 10000.0f, 1.0f, neox}, qa{n_q_heads, head_dim, n_rot, 10000.0f, 1.0f, neox};
        DeviceBuffer q_apart = d.upload(queries), dq = d.upload(queries), k_apart = d.upload(keys), dk = d.upload(keys);
        d.dev->rope(q_apart.as<float>(), dpos.as<int32_t>(), n_tok, qa, *d.stream);
        d.dev->rope(k_apart.as<float>(), dpos.as<int32_t>(), n_tok, a, *d.stream);
        const KvRows no_cache{nullptr, DType::F16, nullptr, nullptr, n_tok, n, 0, 0};
        d.dev->rope_qkv_store({.q = dq.as<float>(), .q_rope = qa, .k = dk.as<float>(), .k_rope = a, .k_rows = no_cache, .pos = dpos.as<int32_t>()},
                              *d.stream);
        CHECK(d.download<float>(dq, queries.size()) == d.download<float>(q_apart, queries.size()));
        CHECK(d.download<float>(dk, keys.size()) == d.download<float>(k_apart, keys.size()));
        CHECK(d.download<float>(dk, keys.size()) != keys);
    }
}

// Attention over a paged cache in every KV type the device reads: three decode rows (1, 37 and
// 300 keys: partial blocks and several splits) and a prompt chunk of four rows of one sequence
// (consecutive positions, one block table, given as a run), over blocks handed out in a shuffled
// order, 3 query heads per KV head (and 8, and 20 of one KV head, which a CUDA thread block
// takes in two passes of at most 16); plain, with gemma's window, scale and soft cap, with
// gpt-oss's sinks, and with value heads narrower than the keys' (MLA's latent: values are the
// first v_head_dim of each KV head's keys, v = k); head sizes of 40 (values one at a time) and 64
// (eight at a time, the tiled prompt kernel).
struct AttentionCase {
    int32_t head_dim;
    int32_t window;
    float scale, softcap;
    bool sinks = false;
    int32_t v_head_dim = 0;
    int32_t table_blocks = 0;  // block tables this long (0: 300 keys' worth), as a long context's
    int32_t n_head = 6, n_head_kv = 2;
};
std::vector<float> paged_attention_case(TestDevice& d, DType kv_type, const AttentionCase& ac) {
    const std::vector<int32_t> n_kv = {1, 37, 300, 45, 46, 47, 48};
    const int32_t n_seq = 7, n_head = ac.n_head, n_head_kv = ac.n_head_kv, head_dim = ac.head_dim, bs = kKvBlockSize;
    const int32_t max_blocks = ac.table_blocks > 0 ? ac.table_blocks : (300 + bs - 1) / bs;
    const int64_t row_values = int64_t{n_head_kv} * head_dim;
    const int64_t row_stride = int64_t(row_bytes(kv_type, row_values)), block_stride = bs * row_stride;
    int32_t n_blocks = 4;  // unused blocks in between
    for (int32_t s = 0; s < 4; ++s) n_blocks += (n_kv[s] + bs - 1) / bs;
    std::vector<int32_t> order(n_blocks);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937(61));
    std::vector<int32_t> tables(n_seq * max_blocks, 0);
    int32_t next = 0;
    for (int32_t s = 0; s < 4; ++s)
        for (int32_t b = 0; b < (n_kv[s] + bs - 1) / bs; ++b) tables[s * max_blocks + b] = order[next++];
    for (int32_t s = 4; s < n_seq; ++s) std::copy_n(&tables[3 * max_blocks], max_blocks, &tables[s * max_blocks]);

    // The cache's rows in its type, written as the CPU writes them.
    const auto kf = normal_floats(n_blocks * bs * row_values, 62), vf = normal_floats(n_blocks * bs * row_values, 63);
    std::vector<uint8_t> k(n_blocks * block_stride), v(k.size());
    for (int64_t r = 0; r < n_blocks * bs; ++r) {
        cpu::store_kv_row(kv_type, &kf[r * row_values], &k[r * row_stride], row_values);
        cpu::store_kv_row(kv_type, &vf[r * row_values], &v[r * row_stride], row_values);
    }
    const auto q = normal_floats(n_seq * n_head * head_dim, 64, 2.0f);  // peaky softmax
    const auto sinks = normal_floats(n_head, 65, 2.0f);
    const int32_t vd = ac.v_head_dim > 0 ? ac.v_head_dim : head_dim;
    const size_t out_values = size_t(n_seq) * n_head * vd;
    DeviceBuffer dk = d.upload(k), dv = d.upload(v), dq = d.upload(q), dt = d.upload(tables), dn = d.upload(n_kv);
    DeviceBuffer dsinks = d.upload(sinks);
    DeviceBuffer dout = d.upload(std::vector<float>(out_values, std::nanf("")));  // poisoned: every value must be written
    DeviceBuffer scratch = d.zeros(std::max<size_t>(1, d.dev->attention_scratch_floats(n_seq, n_head, head_dim, max_blocks)) * 4);
    const QueryRun prompt{3, 4};
    DecodeAttentionArgs a;
    a.q = dq.as<float>();
    a.out = dout.as<float>();
    a.k = dk.data();
    a.v = ac.v_head_dim > 0 ? dk.data() : dv.data();
    a.kv_type = kv_type;
    a.block_tables = dt.as<int32_t>();
    a.n_kv = dn.as<int32_t>();
    a.n_seq = n_seq;
    a.max_blocks = max_blocks;
    a.n_head = n_head;
    a.n_head_kv = n_head_kv;
    a.head_dim = head_dim;
    a.row_stride = row_stride;
    a.block_stride = block_stride;
    a.scratch = scratch.as<float>();
    a.window = ac.window;
    a.scale = ac.scale;
    a.softcap = ac.softcap;
    a.sinks = ac.sinks ? dsinks.as<float>() : nullptr;
    a.v_head_dim = ac.v_head_dim;
    a.runs = &prompt;
    a.n_runs = 1;
    d.dev->decode_attention(a, *d.stream);
    const auto out = d.download<float>(dout, out_values);

    std::vector<float> ref(out_values);
    for (int32_t s = 0; s < n_seq; ++s) {
        cpu::AttentionArgs c;
        c.q = q.data() + s * n_head * head_dim;
        c.out = ref.data() + s * n_head * vd;
        c.k = k.data();
        c.v = ac.v_head_dim > 0 ? k.data() : v.data();
        c.sinks = ac.sinks ? sinks.data() : nullptr;
        c.v_head_dim = ac.v_head_dim;
        c.n_tokens = 1;
        c.pos0 = n_kv[s] - 1;
        c.n_head = n_head;
        c.n_head_kv = n_head_kv;
        c.head_dim = head_dim;
        c.kv_stride = row_stride;
        c.kv_type = kv_type;
        c.block_table = tables.data() + s * max_blocks;
        c.block_size = bs;
        c.block_stride = block_stride;
        c.window = ac.window;
        c.scale = ac.scale;
        c.softcap = ac.softcap;
        cpu::attention(c);
    }
    // The prompt rows may go through half-precision tensor-core tiles on a GPU.
    const bool sim = d.dev->name() == "sim";
    int64_t bad = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
        const bool prompt_row = int64_t(i) / (n_head * vd) >= prompt.first;
        const double tol = sim ? 1e-4 * std::abs(ref[i]) + 1e-5 : (prompt_row ? 4e-3 : 1e-4) * (std::abs(ref[i]) + 1.0);
        bad += !(std::abs(out[i] - ref[i]) <= tol);
    }
    CHECK(bad == 0);
    return out;
}
void paged_attention(TestDevice& d) {
    const AttentionCase cases[] = {{40, 0, 0.0f, 0.0f},          {64, 0, 0.0f, 0.0f},        {64, 20, 0.09f, 5.0f},
                                   {64, 20, 0.0f, 0.0f, true},   {40, 0, 0.0f, 0.0f, true},  {64, 0, 0.0f, 0.0f, false, 48},
                                   {40, 0, 0.0f, 0.0f, false, 24},
                                   // a million positions' tables: the CUDA kernel's scratch holds five rows of them, so the
                                   // seven rows run in groups
                                   {64, 0, 0.0f, 0.0f, false, 0, 65536},
                                   {64, 0, 0.0f, 0.0f, false, 0, 0, 16, 2},  {128, 0, 0.0f, 0.0f, true, 0, 0, 20, 1}};
    for (const DType kv_type : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0}) {
        if (!d.dev->supports_kv(kv_type)) continue;
        for (const AttentionCase& ac : cases) {
            if ((kv_type == DType::Q8_0 || kv_type == DType::Q4_0) && ac.head_dim % 32 != 0) continue;  // whole blocks a row
            INFO(d.dev->name() << ", KV " << dtype_name(kv_type) << ", head size " << ac.head_dim << ", window "
                               << ac.window << ", scale " << ac.scale << ", soft cap " << ac.softcap << ", sinks "
                               << ac.sinks << ", value head " << ac.v_head_dim << ", heads " << ac.n_head << "/"
                               << ac.n_head_kv);
            paged_attention_case(d, kv_type, ac);
        }
    }
    // A row's splits follow from its key count alone: the same bits from a table of 19 blocks
    // and of 600 (a longer context's, whose grid holds more splits).
    const AttentionCase narrow{64, 0, 0.0f, 0.0f}, wide{64, 0, 0.0f, 0.0f, false, 0, 600};
    CHECK(paged_attention_case(d, DType::F16, narrow) == paged_attention_case(d, DType::F16, wide));
}

// A captured graph runs its ops with the inputs its buffers hold at launch, as often as it is
// launched; a capture that waits for the device or joins another stream is refused.
void graph_capture(TestDevice& d) {
    const int64_t n_rows = 37, n_cols = 256, n = 4;
    std::mt19937 rng(71);
    const auto w = strata::test::random_weights(DType::Q4_0, n_rows, n_cols, rng);
    const auto nw = normal_floats(n_cols, 72);
    DeviceBuffer dw = d.upload(w), dnw = d.upload(nw), dx = d.zeros(n * n_cols * 4), dxn = d.zeros(n * n_cols * 4),
                 dy = d.zeros(n * n_rows * 4);
    Stream& s = *d.stream;
    auto step = [&] {
        d.dev->rms_norm(dx.as<float>(), dnw.as<float>(), dxn.as<float>(), n, n_cols, 1e-5f, s);
        d.dev->matmul({DType::Q4_0, dw.data(), dxn.as<float>(), dy.as<float>(), n_rows, n_cols, n}, s);
    };
    // Once directly (which also sizes the matmul's scratch), then as a graph with other inputs.
    std::vector<std::vector<float>> inputs = {normal_floats(n * n_cols, 73), normal_floats(n * n_cols, 74)};
    std::vector<std::vector<float>> direct;
    for (const auto& x : inputs) {
        d.dev->copy_h2d(dx.data(), x.data(), x.size() * 4, s);
        step();
        direct.push_back(d.download<float>(dy, n * n_rows));
    }
    std::unique_ptr<Graph> graph = d.dev->capture(s, step);
    for (int round = 0; round < 2; ++round)
        for (size_t i = 0; i < inputs.size(); ++i) {
            d.dev->copy_h2d(dx.data(), inputs[i].data(), inputs[i].size() * 4, s);
            graph->launch(s);
            CHECK(d.download<float>(dy, n * n_rows) == direct[i]);
        }
    auto event = d.dev->make_event();
    CHECK_THROWS_AS(d.dev->capture(s, [&] { event->record(s); }), BackendError);
    CHECK_THROWS_AS(d.dev->capture(s, [&] { s.synchronize(); }), BackendError);
    // The stream works normally after a refused capture.
    d.dev->copy_h2d(dx.data(), inputs[0].data(), inputs[0].size() * 4, s);
    step();
    CHECK(d.download<float>(dy, n * n_rows) == direct[0]);
}

// A copy in on one stream, an op on another, a copy out on a third: events are the only order.
void streams_and_events(TestDevice& d) {
    auto compute = d.dev->make_stream("compute"), h2d = d.dev->make_stream("h2d"), d2h = d.dev->make_stream("d2h");
    auto copied = d.dev->make_event(), added = d.dev->make_event();
    const int64_t n = 1 << 20;
    std::vector<float> x(n), y(n);
    std::iota(x.begin(), x.end(), 0.0f);
    for (int64_t i = 0; i < n; ++i) y[i] = 0.5f * float(i);
    DeviceBuffer dx = d.dev->memory().allocate(n * 4, "x"), dy = d.dev->memory().allocate(n * 4, "y");
    d.dev->copy_h2d(dx.data(), x.data(), n * 4, *h2d);
    d.dev->copy_h2d(dy.data(), y.data(), n * 4, *h2d);
    copied->record(*h2d);
    copied->wait_on(*compute);
    d.dev->add(dy.as<float>(), dx.as<float>(), n, *compute);
    added->record(*compute);
    added->wait_on(*d2h);
    std::vector<float> out(n, -1.0f);
    d.dev->copy_d2h(out.data(), dy.data(), n * 4, *d2h);
    d2h->synchronize();
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; ++i) wrong += out[i] != x[i] + y[i];
    CHECK(wrong == 0);
}

void memory_budget(TestDevice& d) {
    const uint64_t total = d.dev->memory().arena().capacity();
    DeviceBuffer most = d.dev->memory().allocate(total - (uint64_t{1} << 20), "weights");
    CHECK(reinterpret_cast<uintptr_t>(most.data()) % d.dev->memory().arena().alignment() == 0);
    CHECK_THROWS_WITH(d.dev->memory().allocate(uint64_t{2} << 20, "KV cache"), Contains("2 MiB requested by KV cache"));
    most.reset();
    CHECK_NOTHROW(d.dev->memory().allocate(uint64_t{2} << 20, "KV cache"));
}

}  // namespace

STRATA_DEVICE_TEST("matmul rows match the double reference, decode rows as each alone", matmul_rows)
STRATA_DEVICE_TEST("a group of products of one input, plain, RMSNormed or SwiGLUed, gives each weight its own matmul's bits",
                   grouped_products)
STRATA_DEVICE_TEST("a group's edges: an empty product, four of a type, a float weight first after another group's input",
                   group_edges)
STRATA_DEVICE_TEST("rms_norm and swiglu match their definitions in double, add and add_rows exactly", elementwise_ops)
STRATA_DEVICE_TEST("swiglu_clamped matches its definition in double, copy_rows moves strided rows", clamped_glu_rows)
STRATA_DEVICE_TEST("rope matches cpu::rope (normal and NeoX, partial rotation, freq factors, YaRN, heads inside wider rows)", rope_op)
STRATA_DEVICE_TEST("kv_store then kv_gather give each row as the CPU cache rounds it, strides in bytes", kv_rows)
STRATA_DEVICE_TEST("rope_qkv_store gives rope's queries and the bytes of rope then kv_store for keys, kv_store for values",
                   rope_qkv_rows)
STRATA_DEVICE_TEST("attention over a paged KV cache matches cpu::attention for every KV type, variants and prompt runs",
                   paged_attention)
STRATA_DEVICE_TEST("a captured graph replays its ops on the inputs of each launch; captures that wait are refused",
                   graph_capture)
STRATA_DEVICE_TEST("an event orders a copy, an op and a copy back on three streams", streams_and_events)
STRATA_DEVICE_TEST("memory beyond the budget is refused, naming what asked", memory_budget)

TEST_CASE("sim device: a copy takes at least its bytes over the link's rate", "[unit][device]") {
    auto d = gpu::test::sim_device(0.5);  // 0.5 GB/s: 8 MiB takes at least 16.8 ms
    const std::vector<uint8_t> host(uint64_t{8} << 20, 7);
    DeviceBuffer b = d.dev->memory().allocate(host.size(), "x");
    const auto t0 = std::chrono::steady_clock::now();
    d.dev->copy_h2d(b.data(), host.data(), host.size(), *d.stream);
    d.stream->synchronize();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK(seconds >= double(host.size()) / 0.5e9);
    CHECK(d.download<uint8_t>(b, host.size()) == host);
}

TEST_CASE("sim device: a failed op surfaces at synchronize, and later work still runs", "[unit][device]") {
    auto d = gpu::test::sim_device();
    DeviceBuffer w = d.zeros(4096), x = d.zeros(4096), y = d.zeros(4096);
    // I32 is no weight type: the op throws on the device's thread.
    d.dev->matmul({DType::I32, w.data(), x.as<float>(), y.as<float>(), 1, 256, 1}, *d.stream);
    auto event = d.dev->make_event();
    event->record(*d.stream);
    CHECK_THROWS_AS(d.stream->synchronize(), BackendError);
    event->synchronize();  // recorded after the failure: still reached
    d.stream->synchronize();  // the error was reported once
}

TEST_CASE("a group of matmuls whose inputs differ is refused", "[unit][device]") {
    auto d = gpu::test::sim_device();
    std::mt19937 rng(91);
    const auto w = strata::test::random_weights(DType::Q8_0, 8, 64, rng);
    DeviceBuffer dw = d.upload(w), x1 = d.zeros(64 * 4), x2 = d.zeros(64 * 4), y = d.zeros(2 * 8 * 4);
    const MatmulArgs first{DType::Q8_0, dw.data(), x1.as<float>(), y.as<float>(), 8, 64, 1};
    for (int differ = 0; differ < 3; ++differ) {
        MatmulArgs other = first;
        other.y += 8;
        if (differ == 0) other.x = x2.as<float>();
        if (differ == 1) other.n_tok = 2;
        if (differ == 2) other.norm_w = x2.as<float>();
        const MatmulArgs parts[] = {first, other};
        CHECK_THROWS_AS(d.dev->matmul_group(parts, *d.stream), BackendError);
    }
}

TEST_CASE("one launch takes up to three decode products of the first's weight type", "[unit][device]") {
    auto parts = [](std::initializer_list<DType> types, int64_t n_tok) {
        std::vector<MatmulArgs> v;
        for (DType t : types) v.push_back({t, nullptr, nullptr, nullptr, 8, 256, n_tok});
        return v;
    };
    CHECK(launch_products(parts({DType::Q4_K, DType::Q4_K, DType::Q4_K}, 1)) == 3);
    CHECK(launch_products(parts({DType::Q4_K, DType::Q4_K, DType::Q6_K}, 16)) == 2);
    CHECK(launch_products(parts({DType::Q6_K, DType::Q4_K, DType::Q4_K}, 1)) == 1);
    CHECK(launch_products(parts({DType::F16, DType::F16, DType::F16, DType::F16}, 4)) == 3);
    CHECK(launch_products(parts({DType::Q4_K, DType::Q4_K}, Device::kRowWiseRows + 1)) == 1);  // a prompt's products
    CHECK(launch_products(parts({}, 1)) == 0);
}
