#include "gpu/copy_rates.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "gpu/cuda_check.h"

namespace strata::gpu {

namespace {
constexpr int kReps = 5;  // timed copies per direction; the fastest counts

struct DeviceFree {
    void operator()(void* p) const { cudaFree(p); }
};
struct HostFree {
    void operator()(void* p) const { cudaFreeHost(p); }
};
}  // namespace

CopyRates measure_copy_rates(int device, size_t bytes) {
    cuda_check(cudaSetDevice(device), "cudaSetDevice");
    void* raw = nullptr;
    cuda_check(cudaMallocHost(&raw, bytes), "cudaMallocHost (copy-rate probe)");
    const std::unique_ptr<void, HostFree> host(raw);
    std::memset(host.get(), 1, bytes);  // touched, so the copies measure the link, not page faults
    cuda_check(cudaMalloc(&raw, bytes), "cudaMalloc (copy-rate probe)");
    const std::unique_ptr<void, DeviceFree> a(raw);
    cuda_check(cudaMalloc(&raw, bytes), "cudaMalloc (copy-rate probe)");
    const std::unique_ptr<void, DeviceFree> b(raw);
    cudaStream_t stream = nullptr;
    cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    cudaEvent_t start = nullptr, stop = nullptr;
    cuda_check(cudaEventCreate(&start), "cudaEventCreate");
    cuda_check(cudaEventCreate(&stop), "cudaEventCreate");
    // Seconds of the fastest of kReps copies (one untimed first).
    auto best_seconds = [&](void* dst, const void* src, cudaMemcpyKind kind) {
        float best_ms = 0;
        for (int i = 0; i <= kReps; ++i) {
            cuda_check(cudaEventRecord(start, stream), "cudaEventRecord");
            cuda_check(cudaMemcpyAsync(dst, src, bytes, kind, stream), "cudaMemcpyAsync (copy-rate probe)");
            cuda_check(cudaEventRecord(stop, stream), "cudaEventRecord");
            cuda_check(cudaEventSynchronize(stop), "cudaEventSynchronize");
            float ms = 0;
            cuda_check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
            if (i > 0) best_ms = best_ms == 0 ? ms : std::min(best_ms, ms);
        }
        return double(best_ms) / 1e3;
    };
    CopyRates r;
    r.h2d_gbps = double(bytes) / best_seconds(a.get(), host.get(), cudaMemcpyHostToDevice) / 1e9;
    r.d2h_gbps = double(bytes) / best_seconds(host.get(), a.get(), cudaMemcpyDeviceToHost) / 1e9;
    r.device_gbps = 2.0 * double(bytes) / best_seconds(b.get(), a.get(), cudaMemcpyDeviceToDevice) / 1e9;
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    cudaStreamDestroy(stream);
    return r;
}

}  // namespace strata::gpu
