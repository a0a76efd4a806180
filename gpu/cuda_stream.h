#pragma once
// CUDA streams and events behind plain C++ types, so code outside gpu/ orders GPU work without
// CUDA headers. The decode loop uses three streams: weights and inputs come in on `h2d`, kernels
// run on `compute`, results go out on `d2h`; an Event recorded on one and waited on by another
// is the only dependency between them (no device-wide synchronisation).
#include <cstddef>

// The CUDA runtime's own opaque handle types (cudaStream_t is CUstream_st*).
struct CUstream_st;
struct CUevent_st;

namespace strata::gpu {

class Stream {
public:
    Stream();  // a non-blocking stream on the current device; throws BackendError
    ~Stream();
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;

    CUstream_st* get() const { return stream_; }
    void synchronize();  // waits for everything queued so far; throws BackendError on a failed kernel

private:
    CUstream_st* stream_ = nullptr;
};

class Event {
public:
    Event();  // timing disabled: cheapest to record and wait on
    ~Event();
    Event(const Event&) = delete;
    Event& operator=(const Event&) = delete;

    void record(Stream& s);         // marks the work queued on `s` so far
    void wait_on(Stream& s);        // work queued on `s` after this waits for the recorded work
    void synchronize();             // the host waits for the recorded work
    bool done() const;              // the recorded work has finished (never blocks)

private:
    CUevent_st* event_ = nullptr;
};

struct Streams {
    Stream compute;
    Stream h2d;
    Stream d2h;
};

// Asynchronous copies, ordered on `s`. Host memory must stay valid until the stream reaches
// them; it copies at full speed only when page-locked (see cuda_host.h).
void copy_h2d(void* dst, const void* src, size_t bytes, Stream& s);
void copy_d2h(void* dst, const void* src, size_t bytes, Stream& s);
void copy_d2d(void* dst, const void* src, size_t bytes, Stream& s);
void fill_zero(void* dst, size_t bytes, Stream& s);

}  // namespace strata::gpu
