#include "cpu/thread_pool.h"

#include <thread>

#include <oneapi/tbb/task_arena.h>

namespace strata::cpu {

struct ThreadPool::Impl {
    tbb::task_arena arena;
    explicit Impl(int n) : arena(n) {}
};

int default_thread_count() {
    unsigned n = std::thread::hardware_concurrency();
    return n ? static_cast<int>(n) : 1;
}

ThreadPool::ThreadPool(int n_threads)
    : n_threads_(n_threads > 0 ? n_threads : default_thread_count()) {
    impl_ = std::make_unique<Impl>(n_threads_);
}

ThreadPool::~ThreadPool() = default;

void ThreadPool::run(const std::function<void()>& fn) { impl_->arena.execute(fn); }

}  // namespace strata::cpu
