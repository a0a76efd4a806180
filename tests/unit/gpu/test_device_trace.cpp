// DeviceTrace, the host side of the CUDA device's trace, over the simulated device's streams:
// timestamps that the stream sets when it reaches them, as a GPU sets a timing event's.
#include <catch2/catch.hpp>

#include <atomic>
#include <filesystem>
#include <map>
#include <fstream>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/trace.h"
#include "gpu/device.h"
#include "gpu/device_trace.h"
#include "gpu/sim_stream.h"

using namespace strata;
using namespace strata::gpu;

namespace {

// Marks set by the stream when it reaches them, in seconds since the timer's origin.
class StreamTimer final : public DeviceTrace::Timer {
public:
    int mark(Stream& s) override {
        std::lock_guard lock(mu_);
        const int m = next_++;
        times_[m] = -1;
        sim(s).enqueue([this, m] {
            std::lock_guard lock(mu_);
            times_[m] = std::chrono::duration<double>(std::chrono::steady_clock::now() - origin).count();
        });
        return m;
    }
    std::optional<double> seconds(int mark) override {
        std::lock_guard lock(mu_);
        const double t = times_.at(mark);
        return t < 0 ? std::nullopt : std::optional<double>(t);
    }
    void release(int mark) override {
        std::lock_guard lock(mu_);
        times_.erase(mark);
        ++released;
    }
    const std::chrono::steady_clock::time_point origin = std::chrono::steady_clock::now();
    int released = 0;

private:
    std::mutex mu_;
    std::map<int, double> times_;
    int next_ = 0;
};

}  // namespace

TEST_CASE("DeviceTrace: spans become slices once the stream has passed them, never before", "[unit][device]") {
    const auto path = std::filesystem::temp_directory_path() / "strata_device_trace_test.json";
    SimOptions o;
    o.budget_bytes = 1 << 20;
    auto dev = make_sim_device(o);
    auto stream = dev->make_stream("compute");
    StreamTimer timer;
    DeviceTrace spans(timer, timer.origin);
    {
        Trace trace(path);
        spans.set_trace(&trace);
        std::atomic<bool> go{false};
        // Work the stream cannot pass yet: its span stays pending.
        const int b = spans.begin(*stream);
        sim(*stream).enqueue([&] {
            while (!go) std::this_thread::yield();
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        });
        spans.end(b, *stream, "cuda:0: compute", "matmul");
        CHECK(spans.collect() == 1);
        CHECK(trace.size() == 0);
        go = true;
        stream->synchronize();
        CHECK(spans.collect() == 0);
        CHECK(trace.size() == 1);
        CHECK(timer.released == 2);  // both marks handed back for reuse
    }
    std::ifstream in(path);
    const auto events = nlohmann::json::parse(in)["traceEvents"];
    bool found = false;
    for (const auto& e : events) {
        if (e["ph"] != "X") continue;
        found = true;
        CHECK(e["name"] == "matmul");
        CHECK(e["dur"].get<double>() >= 20000);  // the 20 ms the work took, in microseconds
    }
    CHECK(found);
    std::filesystem::remove(path);
}
