#include "gpu/cuda_stream.h"

#include <cstdint>

#include <fmt/format.h>

#include "core/bytes.h"
#include "gpu/cuda_check.h"
#include "gpu/cuda_host.h"
#include "gpu/cuda_kernels.h"
#include "gpu/event_capture.h"

namespace strata::gpu {

CudaStream::CudaStream() { cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate"); }
CudaStream::~CudaStream() { cudaStreamDestroy(stream_); }
void CudaStream::synchronize() { cuda_check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }
bool CudaStream::capturing() const {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    cuda_check(cudaStreamIsCapturing(stream_, &status), "cudaStreamIsCapturing");
    return status != cudaStreamCaptureStatusNone;
}

void* CudaStream::scratch(DevicePool& pool, uint64_t bytes) {
    if (scratch_.bytes() >= bytes) return scratch_.data();
    if (capturing())
        throw BackendError(fmt::format("GPU scratch of {} needed while a graph is captured ({} held)", format_bytes(bytes),
                                       format_bytes(scratch_.bytes())),
                           "an internal error (the step was not run once before its capture); please report it");
    synchronize();
    prepared_ = {};
    scratch_.reset();
    scratch_ = pool.allocate(bytes, "matmul scratch (activations)");
    return scratch_.data();
}

CudaTimer::CudaTimer() {
    cuda_check(cudaEventCreate(&origin_), "cudaEventCreate (trace origin)");
    cuda_check(cudaEventRecord(origin_, nullptr), "cudaEventRecord (trace origin)");
    cuda_check(cudaEventSynchronize(origin_), "cudaEventSynchronize (trace origin)");
    origin_host_ = std::chrono::steady_clock::now();
}
CudaTimer::~CudaTimer() {
    for (CUevent_st* e : events_) cudaEventDestroy(e);
    cudaEventDestroy(origin_);
}
int CudaTimer::mark(Stream& s) {
    if (free_.empty()) {
        CUevent_st* e = nullptr;
        cuda_check(cudaEventCreate(&e), "cudaEventCreate (trace)");
        events_.push_back(e);
        free_.push_back(static_cast<int>(events_.size()) - 1);
    }
    const int m = free_.back();
    free_.pop_back();
    cuda_check(cudaEventRecord(events_[m], cuda(s).get()), "cudaEventRecord (trace)");
    return m;
}
std::optional<double> CudaTimer::seconds(int mark) {
    const cudaError_t q = cudaEventQuery(events_[mark]);
    if (q == cudaErrorNotReady) return std::nullopt;
    cuda_check(q, "cudaEventQuery (trace)");
    float ms = 0;
    cuda_check(cudaEventElapsedTime(&ms, origin_, events_[mark]), "cudaEventElapsedTime");
    return ms / 1e3;
}
void CudaTimer::release(int mark) { free_.push_back(mark); }

CudaEvent::CudaEvent() { cuda_check(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), "cudaEventCreate"); }
CudaEvent::~CudaEvent() { cudaEventDestroy(event_); }
void CudaEvent::record(Stream& s) {
    refuse_event_in_capture(cuda(s).capturing());  // before CUDA records a node for it
    cuda_check(cudaEventRecord(event_, cuda(s).get()), "cudaEventRecord");
}
void CudaEvent::wait_on(Stream& s) {
    refuse_event_in_capture(cuda(s).capturing());  // before CUDA records a node for it
    cuda_check(cudaStreamWaitEvent(cuda(s).get(), event_, 0), "cudaStreamWaitEvent");
}
void CudaEvent::synchronize() { cuda_check(cudaEventSynchronize(event_), "cudaEventSynchronize"); }
bool CudaEvent::done() const {
    const cudaError_t err = cudaEventQuery(event_);
    if (err == cudaErrorNotReady) return false;
    cuda_check(err, "cudaEventQuery");
    return true;
}

void copy_h2d(void* dst, const void* src, size_t bytes, CudaStream& s) {
    // A small copy from mapped memory is read by a kernel: on a copy engine it would wait for
    // the large copies other streams queued before it.
    const bool aligned = (reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src) | bytes) % 16 == 0;
    if (bytes > 0 && bytes <= kMappedCopyBytes && aligned && host_mapped(src, bytes)) return copy_mapped_h2d(dst, src, bytes, s);
    cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s.get()), "cudaMemcpyAsync (host to device)");
}
void copy_d2h(void* dst, const void* src, size_t bytes, CudaStream& s) {
    cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s.get()), "cudaMemcpyAsync (device to host)");
}
void copy_d2d(void* dst, const void* src, size_t bytes, CudaStream& s) {
    cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s.get()), "cudaMemcpyAsync (device to device)");
}
void fill_zero(void* dst, size_t bytes, CudaStream& s) { cuda_check(cudaMemsetAsync(dst, 0, bytes, s.get()), "cudaMemsetAsync"); }

void* cuda_malloc_pool(int device, uint64_t bytes) {
    cuda_check(cudaSetDevice(device), "cudaSetDevice");
    if (bytes == 0) return nullptr;
    void* base = nullptr;
    const cudaError_t err = cudaMalloc(&base, bytes);
    if (err == cudaErrorMemoryAllocation) {
        size_t free_bytes = 0, total = 0;
        cudaGetLastError();  // clear the sticky allocation error before asking
        cudaMemGetInfo(&free_bytes, &total);
        throw BackendError(fmt::format("GPU {}: cannot allocate the --gpu-mem budget of {}: {} of {} free", device,
                                       format_bytes(bytes), format_bytes(free_bytes), format_bytes(total)),
                           "lower --gpu-mem, or stop the other processes using the GPU");
    }
    cuda_check(err, "cudaMalloc of the GPU pool");
    return base;
}

void cuda_free_pool(void* p) { cudaFree(p); }

}  // namespace strata::gpu
