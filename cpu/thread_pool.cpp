#include "cpu/thread_pool.h"

#include <hwloc.h>
#include <immintrin.h>
#include <sched.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>

#include "core/log.h"

namespace strata::cpu {

namespace {
// About 0.2-0.5 ms of pause instructions: longer than any gap between parallel loops in a
// forward pass, short enough that idle workers soon stop burning their cores.
constexpr int kSpinIterations = 1 << 13;

thread_local ThreadPool::Impl* t_current = nullptr;
thread_local bool t_in_task = false;

// Every CPU (OS index) in the order threads are pinned to them: the first PU of each physical
// core, then the second PU of each core, and so on, so a pool smaller than the machine gets
// whole cores before hyper-threads. Empty when hwloc cannot read the topology.
const std::vector<int>& pinning_order() {
    static const std::vector<int> order = [] {
        std::vector<int> out;
        hwloc_topology_t t;
        if (hwloc_topology_init(&t) != 0) return out;
        if (hwloc_topology_load(t) == 0) {
            const int n_cores = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE);
            for (unsigned level = 0;; ++level) {
                bool any = false;
                for (int c = 0; c < n_cores; ++c) {
                    const hwloc_obj_t core = hwloc_get_obj_by_type(t, HWLOC_OBJ_CORE, c);
                    if (hwloc_obj_t pu = hwloc_get_obj_inside_cpuset_by_type(t, core->cpuset, HWLOC_OBJ_PU, level)) {
                        out.push_back(static_cast<int>(pu->os_index));
                        any = true;
                    }
                }
                if (!any) break;
            }
            if (out.empty())  // no core objects: the PUs in their order
                for (int i = 0; i < hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU); ++i)
                    out.push_back(static_cast<int>(hwloc_get_obj_by_type(t, HWLOC_OBJ_PU, i)->os_index));
        }
        hwloc_topology_destroy(t);
        return out;
    }();
    return order;
}

// The CPU of each of n threads (caller first), or empty: no pinning (see thread_pool.h).
std::vector<int> choose_cpus(int n) {
    const char* no_pin = std::getenv("STRATA_NO_PIN");
    if (n < 2 || (no_pin && *no_pin && std::strcmp(no_pin, "0") != 0)) return {};
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return {};
    std::vector<int> cpus;
    for (int cpu : pinning_order())
        if (cpu < CPU_SETSIZE && CPU_ISSET(cpu, &allowed) && static_cast<int>(cpus.size()) < n) cpus.push_back(cpu);
    if (static_cast<int>(cpus.size()) < n) return {};
    return cpus;
}

bool pin_this_thread(int cpu) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    return sched_setaffinity(0, sizeof one, &one) == 0;
}
}  // namespace

// A job is published by bumping `gen` by 2; it is odd while the caller writes the job fields.
// A worker announces itself in `busy` before it reads the fields, and re-checks `gen`, so the
// caller never rewrites fields a worker is reading. Completion counts tasks, not workers, so the
// caller never waits for a worker that is still asleep.
struct ThreadPool::Impl {
    tbb::task_arena arena;
    std::vector<int> cpus;  // the CPU of each thread, the caller's first; empty: unpinned
    std::vector<std::thread> workers;
    std::atomic<uint32_t> gen{0};
    std::atomic<int> busy{0};
    std::atomic<int> sleepers{0};
    std::atomic<bool> stop{false};
    std::atomic<bool> parked{false};  // the caller blocks until its next job: idle workers sleep at once
    // Sleeping uses a mutex and condition variable: libstdc++ 12's atomic wait/notify lost a
    // wake-up here (a worker slept through the pool's destruction).
    std::mutex sleep_mutex;
    std::condition_variable wake;
    std::exception_ptr error;  // the first exception a task threw (guarded by sleep_mutex)
    // the job
    void (*call)(void*, int64_t) = nullptr;
    void* ctx = nullptr;
    int64_t n = 0;
    alignas(64) std::atomic<int64_t> next{0};
    alignas(64) std::atomic<int64_t> done{0};

    explicit Impl(int n_threads) : arena(n_threads), cpus(choose_cpus(n_threads)) {
        // oneTBB sizes itself from the affinity mask of the thread that first uses it: here,
        // before run() pins the caller to one CPU.
        arena.initialize();
        for (int i = 1; i < n_threads; ++i)
            workers.emplace_back([this, i] {
                if (!cpus.empty()) pin_this_thread(cpus[i]);  // best effort: a refusal leaves it unpinned
                worker();
            });
    }
    ~Impl() {
        stop.store(true);
        gen.fetch_add(2);
        notify();
        for (auto& w : workers) w.join();
    }
    void notify() {
        { std::lock_guard<std::mutex> lock(sleep_mutex); }
        wake.notify_all();
    }

    void run_tasks() {
        t_in_task = true;
        for (int64_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < n;) {
            try {
                call(ctx, i);
            } catch (...) {
                std::lock_guard<std::mutex> lock(sleep_mutex);
                if (!error) error = std::current_exception();
            }
            done.fetch_add(1, std::memory_order_release);
        }
        t_in_task = false;
    }

    void worker() {
        // The generation the pool was built with, not gen's value when this thread starts:
        // a job (or the destructor) may already have bumped it by then.
        uint32_t seen = 0;
        while (true) {
            uint32_t g = gen.load(std::memory_order_acquire);
            for (int spin = 0; (g == seen || (g & 1)) && spin < kSpinIterations && !parked.load(std::memory_order_relaxed);
                 ++spin) {
                _mm_pause();
                g = gen.load(std::memory_order_acquire);
            }
            if (g == seen || (g & 1)) {  // idle: sleep until the next job
                std::unique_lock<std::mutex> lock(sleep_mutex);
                sleepers.fetch_add(1);
                while ((g = gen.load()) == seen || (g & 1)) wake.wait(lock);
                sleepers.fetch_sub(1);
            }
            if (stop.load()) return;
            seen = g;
            busy.fetch_add(1);
            if (gen.load() == g) run_tasks();
            busy.fetch_sub(1, std::memory_order_release);
        }
    }

    void parallel_for(int64_t n_tasks, void (*fn)(void*, int64_t), void* c) {
        const uint32_t g = gen.load(std::memory_order_relaxed);
        gen.store(g + 1);  // writing
        parked.store(false, std::memory_order_relaxed);
        while (busy.load() != 0) _mm_pause();
        call = fn;
        ctx = c;
        n = n_tasks;
        done.store(0, std::memory_order_relaxed);
        next.store(0, std::memory_order_relaxed);
        gen.store(g + 2);
        if (sleepers.load() > 0) notify();
        run_tasks();
        while (done.load(std::memory_order_acquire) < n_tasks) _mm_pause();
        if (error) {  // every task has finished: no one else touches `error` now
            std::exception_ptr e = std::move(error);
            error = nullptr;
            std::rethrow_exception(e);
        }
    }
};

int default_thread_count() {
    unsigned n = std::thread::hardware_concurrency();
    return n ? static_cast<int>(n) : 1;
}

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads > 0 ? n_threads : default_thread_count()) {
    impl_ = std::make_unique<Impl>(n_threads_);
    if (pinned()) STRATA_LOG_DEBUG("cpu: {} threads pinned to CPUs {}", n_threads_, fmt::join(impl_->cpus, ","));
}

ThreadPool::~ThreadPool() = default;

bool ThreadPool::pinned() const { return !impl_->cpus.empty(); }

void ThreadPool::run(const std::function<void()>& fn) {
    struct Restore {
        Impl* current = t_current;
        bool affinity = false;
        cpu_set_t mask{};
        ~Restore() {
            t_current = current;
            if (affinity) sched_setaffinity(0, sizeof mask, &mask);
        }
    } restore;
    // The caller takes the first CPU for the job, then gets its own mask back.
    if (pinned() && sched_getaffinity(0, sizeof restore.mask, &restore.mask) == 0)
        restore.affinity = pin_this_thread(impl_->cpus[0]);
    t_current = impl_.get();
    impl_->arena.execute(fn);
}

void parallel_for_impl(int64_t n, void (*call)(void*, int64_t), void* ctx) {
    if (n <= 0) return;
    if (n == 1 || t_in_task) {
        for (int64_t i = 0; i < n; ++i) call(ctx, i);
        return;
    }
    if (ThreadPool::Impl* p = t_current; p && !p->workers.empty()) return p->parallel_for(n, call, ctx);
    if (t_current) {  // a pool of one thread
        for (int64_t i = 0; i < n; ++i) call(ctx, i);
        return;
    }
    tbb::parallel_for(int64_t{0}, n, [&](int64_t i) { call(ctx, i); }, tbb::simple_partitioner());
}

void park_idle_workers() {
    if (ThreadPool::Impl* p = t_current; p && !t_in_task) p->parked.store(true, std::memory_order_relaxed);
}

int parallel_threads() {
    if (t_in_task) return 1;
    if (t_current) return static_cast<int>(t_current->workers.size()) + 1;
    return std::max(1, tbb::this_task_arena::max_concurrency());
}

void parallel_copy(void* dst, const void* src, size_t bytes) {
    constexpr size_t kPiece = size_t{1} << 20;
    const auto n = static_cast<int64_t>((bytes + kPiece - 1) / kPiece);
    parallel_for(n, [&](int64_t i) {
        const size_t at = size_t(i) * kPiece;
        std::memcpy(static_cast<char*>(dst) + at, static_cast<const char*>(src) + at, std::min(kPiece, bytes - at));
    });
}

}  // namespace strata::cpu
