#pragma once
// The CPU worker threads. `ThreadPool(n)` owns n - 1 persistent workers; the thread that calls
// run() is the n-th. Inside run(), cpu::parallel_for hands tasks to them with no thread start-up
// and no sleep/wake-up per call: workers spin (with pause) for a while after each job, then
// sleep on a futex. A oneTBB arena of the same size is kept for code that uses TBB directly.
//
// Why not TBB alone: in decode a SmolLM2 matmul takes 10-30 us, and a TBB worker woken per
// parallel_for arrived after the caller had done all the work (1.06 CPUs busy of 2 on a
// 1536x576 Q4_1 GEMV loop; the same loop on this pool keeps both busy).
//
// Pinning: each thread is bound to its own CPU (hwloc's topology: one PU of every physical
// core first, then the second PU of every core), workers for their lifetime and the caller of
// run() while it runs (its own affinity is restored after), so the kernels' working sets stay
// in their core's L1/L2. The pool runs unpinned when STRATA_NO_PIN=1 is set, when it has one
// thread, or when the creating thread's affinity mask or hwloc's topology offers fewer CPUs
// than threads.
#include <cstdint>
#include <functional>
#include <memory>

namespace strata::cpu {

class ThreadPool {
public:
    explicit ThreadPool(int n_threads = 0);  // 0: every core
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;
    int n_threads() const { return n_threads_; }
    // Whether the threads are pinned, each to its own CPU (the caller's during run() first).
    bool pinned() const;
    // Runs `fn` on the calling thread with this pool current: cpu::parallel_for inside it uses
    // the pool's threads, and TBB loops the arena's (at most n_threads()).
    void run(const std::function<void()>& fn);

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
    int n_threads_;
};

int default_thread_count();

// Calls fn(i) for every i in [0, n), spread over the current pool's threads (the caller takes
// tasks too), and returns when all are done. Tasks are handed out one at a time in order. With no
// current pool it uses oneTBB; called from inside a task it runs the tasks inline.
void parallel_for_impl(int64_t n, void (*call)(void* ctx, int64_t i), void* ctx);
template <class F>
void parallel_for(int64_t n, F&& fn) {
    parallel_for_impl(n, [](void* ctx, int64_t i) { (*static_cast<std::remove_reference_t<F>*>(ctx))(i); },
                      const_cast<void*>(static_cast<const void*>(&fn)));
}
// memcpy spread over the current pool's threads, a MiB a task: one thread moves a fraction of
// what the memory can (op offload's weights the CPU keeps in the file's layout, copied into
// pinned buffers for the device).
void parallel_copy(void* dst, const void* src, size_t bytes);
// The caller is about to block (a disk read it waits for): the current pool's idle workers stop
// spinning and sleep until its next parallel_for. Spinning cores would take the CPU time the
// wait's own work needs (the kernel's I/O completions, the reader) on a machine with no spare core.
void park_idle_workers();
// Threads parallel_for would use here (1 inside a task).
int parallel_threads();

}  // namespace strata::cpu
