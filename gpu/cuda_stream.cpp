#include "gpu/cuda_stream.h"

#include "gpu/cuda_check.h"

namespace strata::gpu {

Stream::Stream() { cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate"); }
Stream::~Stream() { cudaStreamDestroy(stream_); }
void Stream::synchronize() { cuda_check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

Event::Event() { cuda_check(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), "cudaEventCreate"); }
Event::~Event() { cudaEventDestroy(event_); }
void Event::record(Stream& s) { cuda_check(cudaEventRecord(event_, s.get()), "cudaEventRecord"); }
void Event::wait_on(Stream& s) { cuda_check(cudaStreamWaitEvent(s.get(), event_, 0), "cudaStreamWaitEvent"); }
void Event::synchronize() { cuda_check(cudaEventSynchronize(event_), "cudaEventSynchronize"); }
bool Event::done() const {
    const cudaError_t err = cudaEventQuery(event_);
    if (err == cudaErrorNotReady) return false;
    cuda_check(err, "cudaEventQuery");
    return true;
}

void copy_h2d(void* dst, const void* src, size_t bytes, Stream& s) {
    cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s.get()), "cudaMemcpyAsync (host to device)");
}
void copy_d2h(void* dst, const void* src, size_t bytes, Stream& s) {
    cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s.get()), "cudaMemcpyAsync (device to host)");
}
void copy_d2d(void* dst, const void* src, size_t bytes, Stream& s) {
    cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s.get()), "cudaMemcpyAsync (device to device)");
}
void fill_zero(void* dst, size_t bytes, Stream& s) { cuda_check(cudaMemsetAsync(dst, 0, bytes, s.get()), "cudaMemsetAsync"); }

}  // namespace strata::gpu
