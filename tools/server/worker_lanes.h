#pragma once
// The threads that run requests the event loop has read whole: a general lane (completions,
// embeddings, token routes) and a small reserved lane for the cheap probes (/health, /metrics,
// /v1/models), so those answer while every general worker is busy. Each lane queues a bounded
// number of requests; beyond that `submit` says no and the loop answers 503.
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"

namespace strata::server {

template <typename Job>
class WorkerLane {
public:
    // Throws UsageError when the system will not start that many threads (those started end).
    WorkerLane(size_t threads, size_t max_waiting, std::function<void(Job&&)> run) : run_(std::move(run)), max_waiting_(max_waiting) {
        try {
            threads_.reserve(threads);
            for (size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { work(); });
        } catch (const std::exception& e) {  // system_error, or bad_alloc for the threads' memory
            const size_t started = threads_.size();
            join();
            throw UsageError(fmt::format("the system would not start {} worker threads ({} started: {})", threads, started, e.what()),
                             "answer with fewer: a smaller --http-threads, or smaller --max-batch and --max-queue, which size its default");
        }
    }
    ~WorkerLane() { join(); }
    WorkerLane(const WorkerLane&) = delete;
    WorkerLane& operator=(const WorkerLane&) = delete;

    // Queues `job` unless every thread is busy and max_waiting jobs wait (then `job` is left untouched).
    bool submit(Job& job) {
        {
            std::lock_guard lock(mu_);
            if (stopping_ || queue_.size() + busy_ >= threads_.size() + max_waiting_) return false;
            queue_.push_back(std::move(job));
        }
        cv_.notify_one();
        return true;
    }
    // Runs what is queued, then ends the threads.
    void join() {
        {
            std::lock_guard lock(mu_);
            stopping_ = true;
        }
        cv_.notify_all();
        for (std::thread& t : threads_)
            if (t.joinable()) t.join();
    }

private:
    void work() {
        for (;;) {
            Job job;
            {
                std::unique_lock lock(mu_);
                cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
                if (queue_.empty()) return;
                job = std::move(queue_.front());
                queue_.pop_front();
                ++busy_;
            }
            run_(std::move(job));
            std::lock_guard lock(mu_);
            --busy_;
        }
    }

    std::function<void(Job&&)> run_;
    size_t max_waiting_;
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::deque<Job> queue_;
    size_t busy_ = 0;
    bool stopping_ = false;
    std::vector<std::thread> threads_;
};

}  // namespace strata::server
