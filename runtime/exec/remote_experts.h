#pragma once
// Routed experts a mixture-of-experts layer computes elsewhere than on the host's CPU: the
// device backend holds the most chosen ones in device memory (runtime/exec/device/device_experts.h).
// MoeFfn hands each such expert its rows as soon as the router has chosen, computes its own
// experts meanwhile, and collects the outputs before it sums every expert's in index order, so
// a row's result has the same bits wherever its experts ran (on the simulated device, whose
// kernels are the CPU's).
#include <cstdint>

namespace strata::runtime {

class RemoteExperts {
public:
    virtual ~RemoteExperts() = default;
    // Whether expert e of layer il is computed here.
    virtual bool holds(int il, int e) const = 0;
    // Queues expert e of layer il on n rows of x (n_embd floats each), the first n_long of them
    // as one product and the others as decode rows (PassMatmul's split); the outputs land in
    // y (n rows of n_embd) by collect(). x may be reused once this returns; y may not be read
    // before collect().
    virtual void start(int il, int e, const float* x, int64_t n, int64_t n_long, float* y) = 0;
    // Waits for every expert started since the last collect(); their outputs are then in y.
    virtual void collect() = 0;
};

}  // namespace strata::runtime
