#include "probe/sim_rates.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include "core/dtype.h"
#include "gpu/device.h"
#include "probe/measure.h"

namespace strata::probe {

namespace {

// Microseconds a device op costs beyond its bytes and flops, on average over a layer's mix:
// queueing it on a stream, handing it to the device's threads, and the fixed cost of a small
// kernel call (activation conversion, scratch, the parallel loop). Measured on decode-sized
// ops of a tiny layer (matmuls of 8 KiB of weights, vectors of 256 floats), whose bytes take
// well under a microsecond, over many layers in a row.
constexpr int64_t kCols = 256;

std::unique_ptr<gpu::Device> probe_device(int threads) {
    gpu::SimOptions o;
    o.budget_bytes = uint64_t{4} << 20;
    o.n_threads = threads;
    return gpu::make_sim_device(o);
}

double op_overhead_us(int threads, int n_layers) {
    constexpr int64_t kRows = 64;
    auto dev = probe_device(threads);
    auto stream = dev->make_stream("probe");
    const size_t w_bytes = row_bytes(DType::Q4_0, kCols) * kRows;
    gpu::DeviceBuffer w = dev->memory().allocate(w_bytes, "probe weights");
    gpu::DeviceBuffer x = dev->memory().allocate(kCols * 4, "probe"), y = dev->memory().allocate(kRows * 4, "probe");
    gpu::DeviceBuffer norm = dev->memory().allocate(kCols * 4, "probe");
    const std::vector<uint8_t> zeros(std::max<size_t>(w_bytes, kCols * 4), 0);  // zero Q4_0 blocks are valid
    for (const gpu::DeviceBuffer* b : {&w, &x, &y, &norm}) dev->copy_h2d(b->data(), zeros.data(), b->bytes(), *stream);
    stream->synchronize();
    // A layer's mix: 7 matmuls and 9 small vector ops.
    auto layer = [&] {
        for (int i = 0; i < 7; ++i) dev->matmul({DType::Q4_0, w.data(), x.as<float>(), y.as<float>(), kRows, kCols, 1}, *stream);
        for (int i = 0; i < 3; ++i) dev->rms_norm(x.as<float>(), norm.as<float>(), x.as<float>(), 1, kCols, 1e-5f, *stream);
        for (int i = 0; i < 6; ++i) dev->add(x.as<float>(), norm.as<float>(), kCols, *stream);
    };
    layer();  // warm the kernels' scratch
    stream->synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    for (int l = 0; l < n_layers; ++l) layer();
    stream->synchronize();
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / (16.0 * n_layers);
}

// Microseconds of one hop of a pass's data to the host and back, as a CPU layer or CPU attention
// beside the device makes it (runtime/exec/device/device_layer.cpp, device_attention.cpp): the compute
// stream's result goes down on the D2H stream, the host waits for it, sends it up on the H2D
// stream, and the compute stream waits for that. Each step wakes a waiting thread; the copies
// are 1 KiB and the ops tiny, so what is measured is the waking, less one op's overhead.
double handoff_us(int threads, int n_hops, double op_us) {
    auto dev = probe_device(threads);
    auto compute = dev->make_stream("compute"), down = dev->make_stream("d2h"), up = dev->make_stream("h2d");
    auto computed = dev->make_event(), landed = dev->make_event(), returned = dev->make_event();
    gpu::DeviceBuffer x = dev->memory().allocate(kCols * 4, "probe"), b = dev->memory().allocate(kCols * 4, "probe");
    std::vector<float> host(kCols, 0.0f);
    dev->copy_h2d(x.data(), host.data(), kCols * 4, *compute);
    dev->copy_h2d(b.data(), host.data(), kCols * 4, *compute);
    auto hop = [&] {
        dev->add(x.as<float>(), b.as<float>(), kCols, *compute);
        computed->record(*compute);
        computed->wait_on(*down);
        dev->copy_d2h(host.data(), x.data(), kCols * 4, *down);
        landed->record(*down);
        landed->synchronize();
        dev->copy_h2d(x.data(), host.data(), kCols * 4, *up);
        returned->record(*up);
        returned->wait_on(*compute);
    };
    for (int i = 0; i < 10; ++i) hop();  // the streams' threads started and warm
    compute->synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n_hops; ++i) hop();
    compute->synchronize();
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / n_hops;
    return std::max(0.0, us - op_us);
}

}  // namespace

planner::SimProfile measure_sim_device(const std::vector<DType>& types, int threads, bool quick, uint64_t llc_bytes) {
    planner::SimProfile s;
    s.n_threads = threads;
    for (DType t : types) {
        const planner::KernelRate r = measure_matmul(t, threads, quick, llc_bytes, false);  // device copies keep the file's layout
        if (r.gemv_gbps > 0) s.rates.push_back(r);
    }
    s.op_overhead_us = op_overhead_us(threads, quick ? 50 : 500);
    s.handoff_us = handoff_us(threads, quick ? 200 : 2000, s.op_overhead_us);
    return s;
}

}  // namespace strata::probe
