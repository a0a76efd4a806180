#pragma once
// A Chrome/Perfetto trace (the JSON "traceEvents" format): one track per I/O queue, copy
// stream and compute thread, one slice per layer operation, so overlap can be seen in
// chrome://tracing or ui.perfetto.dev. Written when the Trace is destroyed.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

namespace strata {

class Trace {
public:
    using Clock = std::chrono::steady_clock;

    explicit Trace(std::filesystem::path path);  // throws IoError when `path` cannot be written
    ~Trace();  // writes the file; errors are logged, never thrown from here
    Trace(const Trace&) = delete;
    Trace& operator=(const Trace&) = delete;

    // Track ids are stable per name ("compute", "io", "h2d"); thread-safe.
    int track(const std::string& name);
    void slice(int track, std::string name, Clock::time_point begin, Clock::time_point end, std::string args_json = {});
    void write() const;  // also callable early (e.g. before exiting on Ctrl-C)
    size_t size() const;

private:
    struct Event {
        int track;
        std::string name;
        double ts_us, dur_us;
        std::string args;
    };
    std::filesystem::path path_;
    Clock::time_point origin_;
    mutable std::mutex mu_;
    std::vector<std::string> tracks_;
    std::vector<Event> events_;
};

// Records [construction, destruction) as a slice when `trace` is not null.
class TraceScope {
public:
    TraceScope(Trace* trace, int track, std::string name) : trace_(trace), track_(track), name_(std::move(name)) {
        if (trace_) begin_ = Trace::Clock::now();
    }
    ~TraceScope() {
        if (trace_) trace_->slice(track_, std::move(name_), begin_, Trace::Clock::now());
    }

private:
    Trace* trace_;
    int track_;
    std::string name_;
    Trace::Clock::time_point begin_;
};

}  // namespace strata
