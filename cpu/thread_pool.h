#pragma once
// The CPU worker threads: one oneTBB arena sized by `-t N` (default: all cores). Kernels use
// tbb::parallel_for inside `run`, so they never start threads of their own per call.
#include <functional>
#include <memory>

namespace strata::cpu {

class ThreadPool {
public:
    explicit ThreadPool(int n_threads = 0);  // 0: every core
    ~ThreadPool();
    int n_threads() const { return n_threads_; }
    // Runs `fn` inside the arena: parallel loops in it use at most n_threads() threads.
    void run(const std::function<void()>& fn);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
    int n_threads_;
};

int default_thread_count();

}  // namespace strata::cpu
