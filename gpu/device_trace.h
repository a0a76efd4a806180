#pragma once
// Trace slices of device work timed by the device itself: a timestamp queued on the stream
// before and after each op (CUDA: timing events), read back once the device has passed them.
// The hot path only queues the two timestamps; collect(), called after a step, turns the spans
// the device has finished into slices and keeps the rest for the next call: no synchronization.
#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace strata { class Trace; }

namespace strata::gpu {

class Stream;

class DeviceTrace {
public:
    // The device's side: timestamps queued on its streams, by a number it chooses.
    class Timer {
    public:
        virtual ~Timer() = default;
        virtual int mark(Stream& s) = 0;  // queues a timestamp on `s`
        // Seconds from the timer's origin to the mark once the device has passed it; nullopt
        // before (never blocks).
        virtual std::optional<double> seconds(int mark) = 0;
        virtual void release(int mark) = 0;  // the number may be handed out again
    };

    // `origin`: the host's time at the timer's origin.
    DeviceTrace(Timer& timer, std::chrono::steady_clock::time_point origin) : timer_(timer), origin_(origin) {}
    void set_trace(Trace* trace) { trace_ = trace; }
    bool on() const { return trace_ != nullptr; }

    // Around an op queued on `s`: begin() before it, end() after, named `what` on `track`.
    int begin(Stream& s) { return timer_.mark(s); }
    void end(int begin_mark, Stream& s, const std::string& track, const char* what);
    // The finished spans as slices; returns how many are still pending.
    size_t collect();

private:
    struct Span {
        int track;
        const char* what;
        int begin, end;
    };
    Timer& timer_;
    std::chrono::steady_clock::time_point origin_;
    Trace* trace_ = nullptr;
    std::vector<Span> pending_;
};

}  // namespace strata::gpu
