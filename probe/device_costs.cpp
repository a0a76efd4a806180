#include "probe/device_costs.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/kernel_shapes.h"
#include "gpu/device.h"
#include "probe/typical.h"
#include "storage/budget.h"
#include "storage/pinned_pool.h"

namespace strata::probe {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The reference layer of DeviceOps::attention: llama3-8b's (32 query heads, 8 KV heads of 128).
constexpr int32_t kHeads = 32, kKvHeads = 8, kHeadDim = 128;
constexpr int64_t kKvRow = int64_t(kKvHeads) * kHeadDim * 2;  // one position's keys (or values), F16
// Keys the K and V buffers each hold: the depths measured rotate through them, so that a call
// reads what the one before did not (a decode step reads each layer's KV once, the weights between).
int64_t kv_keys(bool quick) { return quick ? 8192 : 32768; }
// From 128 keys (eight splits of 16 a KV head, gpu/kernels/decode_splits.h): a short context's
// call costs what its splits' serial reads take, not its bytes' share of 512 keys' time (the
// H200's call took 142 us at 512 keys and 150 at 4096, where 512's share priced a 64-key call
// at 18).
std::vector<int32_t> depths(bool quick) {
    return quick ? std::vector<int32_t>{128, 512, 4096} : std::vector<int32_t>{128, 512, 4096, 16384};
}

// Copies and their DRAM load: a buffer the CPU streams while the device copies.
uint64_t copy_bytes(bool quick) { return quick ? 16ull << 20 : 64ull << 20; }

// A small layer's ops (7 matmuls of 8 KiB of weights, 9 vector ops of 256 floats), whose bytes
// take well under a microsecond: what is measured is what each op costs beyond its work.
constexpr int64_t kTinyCols = 256, kTinyRows = 64, kTinyOps = 16;

struct TinyLayer {
    gpu::Device& dev;
    gpu::DeviceBuffer w, x, y, norm;
    explicit TinyLayer(gpu::Device& d, gpu::Stream& s)
        : dev(d), w(d.memory().allocate(row_bytes(DType::Q4_0, kTinyCols) * kTinyRows, "probe weights")),
          x(d.memory().allocate(kTinyCols * 4, "probe")), y(d.memory().allocate(kTinyRows * 4, "probe")),
          norm(d.memory().allocate(kTinyCols * 4, "probe")) {
        for (const gpu::DeviceBuffer* b : {&w, &x, &y, &norm}) fill(d, s, *b, 0);  // zero Q4_0 blocks are valid
    }
    void queue(gpu::Stream& s) const {
        for (int i = 0; i < 7; ++i) dev.matmul({DType::Q4_0, w.data(), x.as<float>(), y.as<float>(), kTinyRows, kTinyCols, 1}, s);
        for (int i = 0; i < 3; ++i) dev.rms_norm(x.as<float>(), norm.as<float>(), x.as<float>(), 1, kTinyCols, 1e-5f, s);
        for (int i = 0; i < 6; ++i) dev.add(x.as<float>(), norm.as<float>(), kTinyCols, s);
    }
};

// Microseconds per op queued on a stream, and inside a captured graph of n_layers layers.
void op_costs(gpu::Device& dev, gpu::Stream& s, int n_layers, planner::DeviceOps& ops) {
    const TinyLayer layer(dev, s);
    layer.queue(s);  // warm the kernels' scratch
    s.synchronize();
    auto t0 = Clock::now();
    for (int l = 0; l < n_layers; ++l) layer.queue(s);
    s.synchronize();
    ops.op_overhead_us = seconds_since(t0) * 1e6 / double(kTinyOps * n_layers);
    try {
        const auto graph = dev.capture(s, [&] {
            for (int l = 0; l < n_layers; ++l) layer.queue(s);
        });
        graph->launch(s);
        s.synchronize();
        constexpr int kLaunches = 5;
        t0 = Clock::now();
        for (int i = 0; i < kLaunches; ++i) graph->launch(s);
        s.synchronize();
        ops.graph_op_us = seconds_since(t0) * 1e6 / double(kLaunches * kTinyOps * n_layers);
    } catch (const BackendError&) {
        ops.graph_op_us = 0;  // this device does not capture
    }
}

// Decode attention of one sequence on the reference layer at each depth, each call reading K and
// V the call before did not. The calls of a depth are queued back to back and timed together, as
// a step's graph runs them: a call's launch and the host's wait are not its cost (each op's
// overhead is priced on its own).
void attention_points(gpu::Device& dev, gpu::Stream& s, bool quick, planner::DeviceOps& ops) {
    const int64_t keys = kv_keys(quick), n_blocks = keys / kKvBlockSize;
    const gpu::DeviceBuffer k = dev.memory().allocate(uint64_t(keys * kKvRow), "probe keys");
    const gpu::DeviceBuffer v = dev.memory().allocate(uint64_t(keys * kKvRow), "probe values");
    fill(dev, s, k, 0x11);  // F16 0x1111: a small finite value
    fill(dev, s, v, 0x11);
    const int64_t q_floats = int64_t(kHeads) * kHeadDim;
    const gpu::DeviceBuffer q = dev.memory().allocate(q_floats * 4, "probe queries");
    const gpu::DeviceBuffer out = dev.memory().allocate(q_floats * 4, "probe output");
    const int reps = quick ? 4 : 6;  // the first untimed: it wakes the stream and warms the kernel
    const int64_t table_ints = n_blocks + 1;  // a call's block table, then its key count
    const gpu::DeviceBuffer tables = dev.memory().allocate(uint64_t(reps * table_ints) * 4, "probe block tables");
    const gpu::DeviceBuffer scratch = dev.memory().allocate(
        std::max<size_t>(1, dev.attention_scratch_floats(1, kHeads, kHeadDim, int32_t(n_blocks))) * 4, "probe scratch");
    fill(dev, s, q, 0x3c);
    std::vector<int32_t> host(size_t(reps * table_ints));
    for (int32_t depth : depths(quick)) {
        const int64_t blocks = (depth + kKvBlockSize - 1) / kKvBlockSize;
        for (int rep = 0, first = 0; rep < reps; ++rep, first = int32_t((first + blocks) % n_blocks)) {
            int32_t* table = host.data() + rep * table_ints;
            for (int64_t i = 0; i < n_blocks; ++i) table[i] = int32_t((first + i) % n_blocks);
            table[n_blocks] = depth;  // the key count
        }
        dev.copy_h2d(tables.data(), host.data(), host.size() * 4, s);
        s.synchronize();
        auto t0 = Clock::now();
        for (int rep = 0; rep < reps; ++rep) {
            if (rep == 1) s.synchronize(), t0 = Clock::now();
            gpu::DecodeAttentionArgs a;
            a.q = q.as<float>();
            a.out = out.as<float>();
            a.k = k.data();
            a.v = v.data();
            a.kv_type = DType::F16;
            a.block_tables = tables.as<int32_t>() + rep * table_ints;
            a.n_kv = a.block_tables + n_blocks;
            a.n_seq = 1;
            a.max_blocks = int32_t(n_blocks);
            a.n_head = kHeads;
            a.n_head_kv = kKvHeads;
            a.head_dim = kHeadDim;
            a.row_stride = kKvRow;
            a.block_stride = kKvBlockSize * kKvRow;
            a.scratch = scratch.as<float>();
            dev.decode_attention(a, s);
        }
        s.synchronize();
        ops.attention.push_back({double(depth), seconds_since(t0) * 1e6 / (reps - 1)});
    }
}

// Copies from and to page-locked host memory, each way the median of a few, while a CPU thread
// streams a DRAM buffer (the host's layers read DRAM while the device's weights come in).
void copy_rates(gpu::Device& dev, gpu::Stream& s, bool quick, planner::DeviceOps& ops) {
    const uint64_t bytes = copy_bytes(quick);
    storage::MemoryBudget unlimited("DRAM", UINT64_MAX);
    const storage::PinnedBuffer host(unlimited, bytes, "probe copies");
    std::memset(host.data(), 0x11, bytes);
    const gpu::DeviceBuffer d = dev.memory().allocate(bytes, "probe copies");
    std::atomic<bool> stop{false};
    std::thread reader([&] {
        std::vector<uint64_t> dram(size_t(4 * bytes / 8), 1);
        volatile uint64_t sink = 0;
        while (!stop.load(std::memory_order_relaxed)) {
            uint64_t sum = 0;
            for (uint64_t x : dram) sum += x;
            sink = sink + sum;
        }
    });
    auto rate = [&](bool up) {
        std::vector<double> gbps;
        for (int rep = 0; rep < (quick ? 3 : 5); ++rep) {
            const auto t0 = Clock::now();
            if (up) dev.copy_h2d(d.data(), host.data(), bytes, s);
            else dev.copy_d2h(host.data(), d.data(), bytes, s);
            s.synchronize();
            gbps.push_back(double(bytes) / seconds_since(t0) / 1e9);
        }
        return median(std::move(gbps));
    };
    ops.h2d_gbps = rate(true);
    ops.d2h_gbps = rate(false);
    stop = true;
    reader.join();
}

// A hop of a pass's data to the host and back, as a CPU layer or CPU attention beside the device
// makes it (runtime/exec/device/device_layer.cpp, device_attention.cpp): the compute stream's
// result goes down on the D2H stream, the host waits for it, sends it up on the H2D stream, and
// the compute stream waits for that. The copies are 1 KiB and the op tiny, so what is measured is
// the waking of each waiting thread. Sets ops.handoff_us: hops back to back, less one op's
// overhead; and ops.round_trip_us: a hop after the device's threads have been idle for longer than
// they wait awake, the host waiting for its end, as a decode step sees each (the median).
void hop_costs(gpu::Device& dev, int n_hops, int n_idle_hops, planner::DeviceOps& ops) {
    auto compute = dev.make_stream("compute"), down = dev.make_stream("d2h"), up = dev.make_stream("h2d");
    auto computed = dev.make_event(), landed = dev.make_event(), returned = dev.make_event();
    const gpu::DeviceBuffer x = dev.memory().allocate(kTinyCols * 4, "probe"), b = dev.memory().allocate(kTinyCols * 4, "probe");
    storage::MemoryBudget unlimited("DRAM", UINT64_MAX);
    const storage::PinnedBuffer host(unlimited, kTinyCols * 4, "probe hop");
    std::memset(host.data(), 0, kTinyCols * 4);
    dev.copy_h2d(x.data(), host.data(), kTinyCols * 4, *compute);
    dev.copy_h2d(b.data(), host.data(), kTinyCols * 4, *compute);
    auto hop = [&] {
        dev.add(x.as<float>(), b.as<float>(), kTinyCols, *compute);
        computed->record(*compute);
        computed->wait_on(*down);
        dev.copy_d2h(host.data(), x.data(), kTinyCols * 4, *down);
        landed->record(*down);
        landed->synchronize();
        dev.copy_h2d(x.data(), host.data(), kTinyCols * 4, *up);
        returned->record(*up);
        returned->wait_on(*compute);
    };
    for (int i = 0; i < 10; ++i) hop();  // the streams' threads started and warm
    compute->synchronize();
    const auto t0 = Clock::now();
    for (int i = 0; i < n_hops; ++i) hop();
    compute->synchronize();
    ops.handoff_us = std::max(0.0, seconds_since(t0) * 1e6 / n_hops - ops.op_overhead_us);
    // A millisecond idle: well beyond the simulated device's spin before its threads sleep, and
    // what a step's sampling or a layer's matmuls give the copy streams.
    constexpr auto kIdle = std::chrono::milliseconds(1);
    std::vector<double> us;
    for (int i = 0; i < n_idle_hops; ++i) {
        std::this_thread::sleep_for(kIdle);
        const auto t1 = Clock::now();
        hop();
        compute->synchronize();
        us.push_back(seconds_since(t1) * 1e6);
    }
    ops.round_trip_us = median(std::move(us));
}

}  // namespace

void fill(gpu::Device& dev, gpu::Stream& s, const gpu::DeviceBuffer& b, unsigned char byte) {
    constexpr size_t kChunk = size_t{4} << 20;
    const std::vector<unsigned char> chunk(std::min<size_t>(kChunk, b.bytes()), byte);
    for (size_t off = 0; off < b.bytes(); off += kChunk)
        dev.copy_h2d(b.as<std::byte>() + off, chunk.data(), std::min(kChunk, size_t(b.bytes() - off)), s);
    s.synchronize();
}

uint64_t device_costs_bytes(bool quick) {
    return 2 * uint64_t(kv_keys(quick) * kKvRow) + copy_bytes(quick) + (4ull << 20);
}

void measure_device_costs(gpu::Device& dev, gpu::Stream& s, bool quick, planner::DeviceOps& ops) {
    attention_points(dev, s, quick, ops);
    op_costs(dev, s, quick ? 50 : 500, ops);
    copy_rates(dev, s, quick, ops);
    hop_costs(dev, quick ? 200 : 2000, quick ? 20 : 100, ops);
}

}  // namespace strata::probe
