#pragma once
// CUDA streams and events behind the device interface's Stream and Event (gpu/device.h), so
// code outside gpu/ orders GPU work without CUDA headers. An Event recorded on one stream and
// waited on by another is the only dependency between them (no device-wide synchronisation).
#include <chrono>
#include <cstddef>
#include <optional>
#include <vector>

#include "gpu/device.h"
#include "gpu/device_trace.h"
#include "gpu/matmul_input.h"

// The CUDA runtime's own opaque handle types (cudaStream_t is CUstream_st*).
struct CUstream_st;
struct CUevent_st;

namespace strata::gpu {

class CudaStream final : public Stream {
public:
    CudaStream();  // a non-blocking stream on the current device; throws BackendError
    ~CudaStream() override;
    CudaStream(const CudaStream&) = delete;
    CudaStream& operator=(const CudaStream&) = delete;

    CUstream_st* get() const { return stream_; }
    void synchronize() override;  // throws BackendError on a failed kernel
    bool capturing() const;       // work queued now is being recorded into a graph

    // At least `bytes` of device scratch from `pool` for the kernels queued on this stream (the
    // matmuls' activation copies), kept between calls. Growing it waits for the stream's queued
    // work, which may still read the old scratch; it cannot grow while the stream is captured.
    void* scratch(DevicePool& pool, uint64_t bytes);
    const PreparedInput& prepared() const { return prepared_; }
    void set_prepared(const PreparedInput& p) { prepared_ = p; }

private:
    CUstream_st* stream_ = nullptr;
    DeviceBuffer scratch_;
    PreparedInput prepared_;  // what scratch_ holds
};

// DeviceTrace's timestamps on CUDA: timing events from a pool, measured (cudaEventElapsedTime)
// from an origin event that the constructor records and waits for once, taking the host's time.
class CudaTimer final : public DeviceTrace::Timer {
public:
    CudaTimer();
    ~CudaTimer() override;
    CudaTimer(const CudaTimer&) = delete;
    CudaTimer& operator=(const CudaTimer&) = delete;
    int mark(Stream& s) override;
    std::optional<double> seconds(int mark) override;
    void release(int mark) override;
    std::chrono::steady_clock::time_point origin_host() const { return origin_host_; }

private:
    CUevent_st* origin_ = nullptr;
    std::vector<CUevent_st*> events_;
    std::vector<int> free_;
    std::chrono::steady_clock::time_point origin_host_;
};

// The CUDA stream behind a Stream of the CUDA device.
inline CudaStream& cuda(Stream& s) { return static_cast<CudaStream&>(s); }

class CudaEvent final : public Event {
public:
    CudaEvent();  // timing disabled: cheapest to record and wait on
    ~CudaEvent() override;
    CudaEvent(const CudaEvent&) = delete;
    CudaEvent& operator=(const CudaEvent&) = delete;

    void record(Stream& s) override;
    void wait_on(Stream& s) override;
    void synchronize() override;
    bool done() const;  // the recorded work has finished (never blocks)

private:
    CUevent_st* event_ = nullptr;
};

// Asynchronous copies, ordered on `s`. Host memory must stay valid until the stream reaches
// them; it copies at full speed only when page-locked (see cuda_host.h).
void copy_h2d(void* dst, const void* src, size_t bytes, CudaStream& s);
void copy_d2h(void* dst, const void* src, size_t bytes, CudaStream& s);
void copy_d2d(void* dst, const void* src, size_t bytes, CudaStream& s);
void fill_zero(void* dst, size_t bytes, CudaStream& s);

// Device memory for a DevicePool: cudaMalloc of `bytes` on `device` (made current). Throws
// BackendError, saying how much is free when the budget does not fit.
void* cuda_malloc_pool(int device, uint64_t bytes);
void cuda_free_pool(void* p);

}  // namespace strata::gpu
