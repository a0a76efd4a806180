// The device interface's contract, on every device (the simulated one always, CUDA where there
// is a GPU): ops against the CPU scalar references, byte-strided KV rows, paged attention,
// stream and event ordering, the memory budget; and the simulated device's throttled link.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "core/error.h"
#include "cpu/attention_cpu.h"
#include "cpu/kv_format.h"
#include "cpu/norm_rope_act.h"
#include "gpu/device.h"
#include "tests/support/random_values.h"
#include "tests/unit/gpu/device_test_support.h"
#include "tests/unit/gpu/random_weights.h"

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

void matmul_rows(TestDevice& d) {
    const int64_t n_rows = 37;
    for (DType type : {DType::F16, DType::Q4_0, DType::Q4_1, DType::Q8_0, DType::Q4_K, DType::Q6_K}) {
        if (!d.dev->supports_weight(type)) continue;
        const int64_t n_cols = type == DType::F16 ? 320 : 5 * 256;
        INFO(d.dev->name() << ", " << dtype_name(type));
        const auto w = gpu::test::random_weights(type, n_rows, n_cols, 11);
        const auto wf = gpu::test::dequantize_ref(type, w, n_rows, n_cols);
        for (int64_t n_tok : {int64_t{1}, int64_t{3}, Device::kRowWiseRows + 3}) {
            INFO(n_tok << " rows");
            const auto x = normal_floats(n_tok * n_cols, 12);
            DeviceBuffer dw = d.upload(w), dx = d.upload(x), dy = d.zeros(n_tok * n_rows * 4);
            d.dev->matmul({type, dw.data(), dx.as<float>(), dy.as<float>(), n_rows, n_cols, n_tok}, *d.stream);
            const auto y = d.download<float>(dy, n_tok * n_rows);
            // Decode rows within the activation quantization of the CPU's format (or exact
            // floats); prompt-sized products may round weights and activations to half.
            const double rel = n_tok > Device::kRowWiseRows ? 2e-3 : 4e-4;
            for (int64_t t = 0; t < n_tok; ++t)
                for (int64_t r = 0; r < n_rows; ++r) {
                    const RowRef ref = row_ref(wf, x.data() + t * n_cols, r, n_cols);
                    CHECK(std::abs(y[t * n_rows + r] - ref.value) <= rel * ref.magnitude + 1e-5);
                }
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

void elementwise_ops(TestDevice& d) {
    const int64_t rows = 3, n = 1001;
    const auto x = normal_floats(rows * n, 41), w = normal_floats(n, 42), up = normal_floats(rows * n, 43),
               b = normal_floats(n, 44);
    DeviceBuffer dx = d.upload(x), dw = d.upload(w), dup = d.upload(up), db = d.upload(b), dy = d.zeros(rows * n * 4);
    Stream& s = *d.stream;

    d.dev->rms_norm(dx.as<float>(), dw.as<float>(), dy.as<float>(), rows, n, 1e-5f, s);
    auto y = d.download<float>(dy, rows * n);
    std::vector<float> ref(rows * n);
    for (int64_t r = 0; r < rows; ++r) cpu::rms_norm(x.data() + r * n, w.data(), ref.data() + r * n, n, 1e-5f);
    for (size_t i = 0; i < ref.size(); ++i) CHECK(y[i] == Approx(ref[i]).epsilon(1e-5).margin(1e-6));

    d.dev->swiglu(dx.as<float>(), dup.as<float>(), rows, n, s);
    y = d.download<float>(dx, rows * n);
    ref = x;
    for (int64_t r = 0; r < rows; ++r) cpu::swiglu(ref.data() + r * n, up.data() + r * n, n);
    for (size_t i = 0; i < ref.size(); ++i) CHECK(y[i] == Approx(ref[i]).epsilon(1e-5).margin(1e-6));

    d.dev->add(dx.as<float>(), dup.as<float>(), rows * n, s);  // on the swiglu output
    d.dev->add_rows(dx.as<float>(), db.as<float>(), rows, n, s);
    const auto sum = d.download<float>(dx, rows * n);
    int64_t bad = 0;  // two float adds in a fixed order: exact
    for (int64_t i = 0; i < rows * n; ++i) bad += sum[i] != (y[i] + up[i]) + b[i % n];
    CHECK(bad == 0);
}

void rope_op(TestDevice& d) {
    const int32_t n_heads = 5, head_dim = 48, n_rot = 32;
    const std::vector<int32_t> pos = {0, 7, 4099};
    std::vector<float> factors(16);
    for (int i = 0; i < 16; ++i) factors[i] = 1.0f + 0.25f * i;
    DeviceBuffer dpos = d.upload(pos), dfac = d.upload(factors);
    for (bool neox : {false, true})
        for (bool with_factors : {false, true}) {
            INFO("neox " << neox << ", freq factors " << with_factors);
            const auto x = normal_floats(pos.size() * n_heads * head_dim, 51);
            DeviceBuffer dx = d.upload(x);
            const RopeArgs a{n_heads, head_dim, n_rot, 500000.0f, 0.5f, neox, with_factors ? dfac.as<float>() : nullptr};
            d.dev->rope(dx.as<float>(), dpos.as<int32_t>(), static_cast<int64_t>(pos.size()), a, *d.stream);
            const auto y = d.download<float>(dx, x.size());
            auto ref = x;
            const cpu::RopeParams p{head_dim, n_rot, 500000.0f, 0.5f, neox, with_factors ? factors.data() : nullptr};
            for (size_t t = 0; t < pos.size(); ++t) cpu::rope(ref.data() + t * n_heads * head_dim, n_heads, pos[t], p);
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

// Three decode sequences (1, 37 and 300 keys: partial blocks and splits) and a prompt of four
// rows of one sequence (consecutive positions, one block table), over blocks handed out in a
// shuffled order, GQA with 3 query heads per KV head.
void paged_attention(TestDevice& d) {
    const std::vector<int32_t> n_kv = {1, 37, 300, 45, 46, 47, 48};
    const int32_t n_seq = 7, n_head = 6, n_head_kv = 2, head_dim = 40, bs = kKvBlockSize;
    const int32_t max_blocks = (300 + bs - 1) / bs;
    const int64_t row_floats = int64_t{n_head_kv} * head_dim, block_floats = bs * row_floats;
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

    const auto k = normal_floats(n_blocks * block_floats, 62), v = normal_floats(n_blocks * block_floats, 63);
    const auto q = normal_floats(n_seq * n_head * head_dim, 64, 2.0f);  // peaky softmax
    DeviceBuffer dk = d.upload(k), dv = d.upload(v), dq = d.upload(q), dt = d.upload(tables), dn = d.upload(n_kv);
    DeviceBuffer dout = d.zeros(q.size() * 4);
    DeviceBuffer scratch = d.zeros(std::max<size_t>(1, d.dev->attention_scratch_floats(n_seq, n_head, head_dim, max_blocks)) * 4);
    DecodeAttentionArgs a;
    a.q = dq.as<float>();
    a.out = dout.as<float>();
    a.k = dk.data();
    a.v = dv.data();
    a.block_tables = dt.as<int32_t>();
    a.n_kv = dn.as<int32_t>();
    a.n_seq = n_seq;
    a.max_blocks = max_blocks;
    a.n_head = n_head;
    a.n_head_kv = n_head_kv;
    a.head_dim = head_dim;
    a.row_stride = row_floats * 4;
    a.block_stride = block_floats * 4;
    a.scratch = scratch.as<float>();
    d.dev->decode_attention(a, *d.stream);
    const auto out = d.download<float>(dout, q.size());

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
        c.kv_stride = row_floats * 4;
        c.block_table = tables.data() + s * max_blocks;
        c.block_size = bs;
        c.block_stride = block_floats * 4;
        cpu::attention(c);
    }
    for (size_t i = 0; i < ref.size(); ++i) {
        INFO("query " << i / (n_head * head_dim) << ", head " << i / head_dim % n_head);
        CHECK(out[i] == Approx(ref[i]).epsilon(1e-4).margin(1e-5));
    }
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
STRATA_DEVICE_TEST("rms_norm, swiglu, add and add_rows match the CPU functions", elementwise_ops)
STRATA_DEVICE_TEST("rope matches cpu::rope (normal and NeoX, partial rotation, freq factors)", rope_op)
STRATA_DEVICE_TEST("kv_store then kv_gather give each row as the CPU cache rounds it, strides in bytes", kv_rows)
STRATA_DEVICE_TEST("decode attention over a paged KV cache matches cpu::attention", paged_attention)
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
