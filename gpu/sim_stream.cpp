#include "gpu/sim_stream.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "core/error.h"
#include "gpu/event_capture.h"

namespace strata::gpu {

namespace {
// How long a waiter spins before it sleeps: a layer's hand-offs come tens of microseconds apart.
constexpr auto kSpin = std::chrono::microseconds(50);

// True once `ready()` holds, false when kSpin passed first; yields the core between checks so a
// thread with work on it runs.
template <class Ready>
bool spin_until(Ready ready) {
    const auto until = std::chrono::steady_clock::now() + kSpin;
    while (!ready()) {
        if (std::chrono::steady_clock::now() >= until) return false;
        std::this_thread::yield();
    }
    return true;
}
}  // namespace

SimStream::SimStream(std::string name) : name_(std::move(name)), worker_([this] { run(); }) {}

SimStream::~SimStream() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    changed_.notify_all();
    worker_.join();
}

void SimStream::enqueue(std::function<void()> work) {
    if (capturing_) {
        captured_.push_back(std::move(work));
        return;
    }
    {
        std::lock_guard lock(mutex_);
        queue_.push_back(std::move(work));
        ++queued_;
    }
    changed_.notify_all();
}

void SimStream::synchronize() {
    if (capturing_)
        throw BackendError("the host waited for a stream that is being captured into a graph",
                           "an internal error (a captured step may not wait for the device); please report it");
    const uint64_t target = queued_.load();
    spin_until([&] { return finished_.load() >= target; });
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return finished_ >= target; });
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void SimStream::begin_capture() {
    captured_.clear();
    capturing_ = true;
}

std::vector<std::function<void()>> SimStream::end_capture() {
    capturing_ = false;
    return std::exchange(captured_, {});
}

void SimStream::run() {
    std::unique_lock lock(mutex_);
    for (;;) {
        if (queue_.empty() && !stopping_) {
            lock.unlock();
            spin_until([&] { return queued_.load() > finished_.load(); });  // all taken work is finished here
            lock.lock();
        }
        changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping, and everything queued has run
        std::function<void()> work = std::move(queue_.front());
        queue_.pop_front();
        lock.unlock();
        std::exception_ptr failed;
        try {
            work();
        } catch (...) {
            failed = std::current_exception();
        }
        lock.lock();
        if (failed && !error_) error_ = failed;
        ++finished_;
        changed_.notify_all();
    }
}

SimEvent::SimEvent() : state_(std::make_shared<State>()) {}

void SimEvent::State::wait_for(uint64_t generation) {
    if (spin_until([&] { return reached.load() >= generation; })) return;
    std::unique_lock lock(mutex);
    reached_changed.wait(lock, [&] { return reached >= generation; });
}

void SimEvent::record(Stream& s) {
    refuse_event_in_capture(sim(s).capturing());
    uint64_t generation;
    {
        std::lock_guard lock(state_->mutex);
        generation = ++state_->recorded;
    }
    sim(s).enqueue([state = state_, generation] {
        {
            std::lock_guard lock(state->mutex);
            state->reached = std::max(state->reached.load(), generation);
        }
        state->reached_changed.notify_all();
    });
}

void SimEvent::wait_on(Stream& s) {
    refuse_event_in_capture(sim(s).capturing());
    uint64_t generation;
    {
        std::lock_guard lock(state_->mutex);
        generation = state_->recorded;
    }
    sim(s).enqueue([state = state_, generation] { state->wait_for(generation); });
}

void SimEvent::synchronize() {
    uint64_t generation;
    {
        std::lock_guard lock(state_->mutex);
        generation = state_->recorded;
    }
    state_->wait_for(generation);
}

}  // namespace strata::gpu
