#pragma once
// Streams and events of the simulated device (sim_device.cpp): each stream is a thread running
// its queue of work in order, an event a counter that streams and the host wait on, with CUDA's
// semantics (waiting on an event never recorded returns at once; work after a failure still
// runs, and the first error surfaces at synchronize()). A thread that waits (a stream for work or
// an event, the host for a stream) spins a little before it sleeps, as CUDA's host threads do:
// a decode step hands work between the host and the device's threads several times a layer,
// and a futex sleep and wake-up costs tens of microseconds on a virtual machine.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gpu/device.h"

namespace strata::gpu {

class SimStream final : public Stream {
public:
    explicit SimStream(std::string name);
    ~SimStream() override;  // runs what is queued, then stops
    SimStream(const SimStream&) = delete;
    SimStream& operator=(const SimStream&) = delete;

    void enqueue(std::function<void()> work);
    void synchronize() override;  // throws BackendError while capturing, as CUDA refuses it
    const std::string& name() const { return name_; }

    // Device::capture: between these, enqueued work is recorded instead of run.
    void begin_capture();
    std::vector<std::function<void()>> end_capture();
    bool capturing() const { return capturing_; }

private:
    void run();

    std::string name_;
    std::mutex mutex_;
    std::condition_variable changed_;
    std::deque<std::function<void()>> queue_;
    std::atomic<uint64_t> queued_{0}, finished_{0};  // written under mutex_, read by spinning waiters
    bool stopping_ = false;
    std::atomic<bool> capturing_{false};
    std::vector<std::function<void()>> captured_;
    std::exception_ptr error_;
    std::thread worker_;  // last: starts once the rest exists
};

// The simulated stream behind a Stream of the simulated device.
inline SimStream& sim(Stream& s) { return static_cast<SimStream&>(s); }

class SimEvent final : public Event {
public:
    SimEvent();
    void record(Stream& s) override;
    void wait_on(Stream& s) override;
    void synchronize() override;

private:
    struct State {
        std::mutex mutex;
        std::condition_variable reached_changed;
        uint64_t recorded = 0;               // records issued
        std::atomic<uint64_t> reached{0};    // records their streams have passed (written under mutex)
        void wait_for(uint64_t generation);
    };
    std::shared_ptr<State> state_;  // shared with the queued work, which may outlive the event
};

}  // namespace strata::gpu
