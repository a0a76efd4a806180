#include "probe/sim_rates.h"

#include <chrono>
#include <vector>

#include "gpu/device.h"
#include "probe/measure.h"

namespace strata::probe {

namespace {

// Microseconds from queueing a tiny op on a stream of the simulated device to its completion,
// over many ops in a row (the queue, the thread hand-off, the pool's run).
double op_overhead_us(int threads, int n_ops) {
    gpu::SimOptions o;
    o.budget_bytes = uint64_t{1} << 20;
    o.n_threads = threads;
    auto dev = gpu::make_sim_device(o);
    auto stream = dev->make_stream("probe");
    gpu::DeviceBuffer x = dev->memory().allocate(64, "probe"), y = dev->memory().allocate(64, "probe");
    const std::vector<float> zeros(16, 0.0f);
    dev->copy_h2d(x.data(), zeros.data(), 64, *stream);
    dev->copy_h2d(y.data(), zeros.data(), 64, *stream);
    stream->synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n_ops; ++i) dev->add(y.as<float>(), x.as<float>(), 16, *stream);
    stream->synchronize();
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / n_ops;
}

}  // namespace

planner::SimProfile measure_sim_device(const std::vector<DType>& types, int threads, bool quick, uint64_t llc_bytes) {
    planner::SimProfile s;
    s.n_threads = threads;
    for (DType t : types) {
        const planner::KernelRate r = measure_matmul(t, threads, quick, llc_bytes);
        if (r.gemv_gbps > 0) s.rates.push_back(r);
    }
    s.op_overhead_us = op_overhead_us(threads, quick ? 200 : 2000);
    return s;
}

}  // namespace strata::probe
