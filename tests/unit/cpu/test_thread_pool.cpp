// cpu::ThreadPool pinning, checked against what the kernel reports: each thread's affinity
// mask (sched_getaffinity) and the CPU it runs on (sched_getcpu), read inside the tasks.
#include <hwloc.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cpu/thread_pool.h"
#include "tests/support/skip.h"

using namespace strata::cpu;

namespace {

// Sets or unsets STRATA_NO_PIN for one test and puts back what was there.
class NoPinEnv {
public:
    explicit NoPinEnv(const char* value) {
        if (const char* v = std::getenv("STRATA_NO_PIN")) saved_ = v;
        if (value) setenv("STRATA_NO_PIN", value, 1);
        else unsetenv("STRATA_NO_PIN");
    }
    ~NoPinEnv() {
        if (saved_) setenv("STRATA_NO_PIN", saved_->c_str(), 1);
        else unsetenv("STRATA_NO_PIN");
    }

private:
    std::optional<std::string> saved_;
};

cpu_set_t own_mask() {
    cpu_set_t m;
    CPU_ZERO(&m);
    REQUIRE(sched_getaffinity(0, sizeof m, &m) == 0);
    return m;
}

struct Seen {
    cpu_set_t mask;
    int cpu = -1;
};

// Runs n tasks on a pool of n threads so that each thread takes exactly one (every task waits
// until all n have started), and returns what each task saw.
std::vector<Seen> one_task_per_thread(ThreadPool& pool) {
    const int n = pool.n_threads();
    std::vector<Seen> seen(n);
    std::atomic<int> started{0};
    std::atomic<bool> timed_out{false};
    pool.run([&] {
        parallel_for(n, [&](int64_t i) {
            started.fetch_add(1);
            const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
            while (started.load() < n)
                if (std::chrono::steady_clock::now() > deadline) {
                    timed_out = true;
                    break;
                }
            sched_getaffinity(0, sizeof seen[i].mask, &seen[i].mask);
            seen[i].cpu = sched_getcpu();
        });
    });
    REQUIRE_FALSE(timed_out.load());
    return seen;
}

}  // namespace

TEST_CASE("a pinned pool runs each thread on its own CPU, whole cores first", "[unit]") {
    const NoPinEnv env(nullptr);
    const cpu_set_t before = own_mask();
    const int n_cpus = CPU_COUNT(&before);
    if (n_cpus < 2) STRATA_SKIP("this process may run on one CPU only");
    const int n = std::min(n_cpus, 4);
    ThreadPool pool(n);
    REQUIRE(pool.pinned());
    const std::vector<Seen> seen = one_task_per_thread(pool);

    std::set<int> cpus;
    for (const Seen& s : seen) {
        CHECK(CPU_COUNT(&s.mask) == 1);
        CHECK(CPU_ISSET(s.cpu, &s.mask));
        CHECK(CPU_ISSET(s.cpu, &before));
        cpus.insert(s.cpu);
    }
    CHECK(static_cast<int>(cpus.size()) == n);

    // With at least n cores available, no two threads share one (hyper-threads come last).
    hwloc_topology_t topo;
    REQUIRE(hwloc_topology_init(&topo) == 0);
    REQUIRE(hwloc_topology_load(topo) == 0);
    std::set<unsigned> cores_available, cores_used;
    for (int c = 0; c < CPU_SETSIZE; ++c) {
        hwloc_obj_t pu = hwloc_get_pu_obj_by_os_index(topo, static_cast<unsigned>(c));
        hwloc_obj_t core = pu ? hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_CORE, pu) : nullptr;
        if (!core) continue;
        if (CPU_ISSET(c, &before)) cores_available.insert(core->logical_index);
        if (cpus.count(c)) cores_used.insert(core->logical_index);
    }
    hwloc_topology_destroy(topo);
    if (static_cast<int>(cores_available.size()) >= n) CHECK(static_cast<int>(cores_used.size()) == n);

    // The caller had the first CPU only while it ran the job.
    const cpu_set_t after = own_mask();
    CHECK(CPU_EQUAL(&before, &after));
}

TEST_CASE("the pool runs unpinned with STRATA_NO_PIN=1 or more threads than CPUs", "[unit]") {
    const cpu_set_t process = own_mask();
    const int n_cpus = CPU_COUNT(&process);
    std::vector<std::unique_ptr<ThreadPool>> pools;
    {
        const NoPinEnv env("1");
        pools.push_back(std::make_unique<ThreadPool>(std::max(2, std::min(n_cpus, 4))));
    }
    {
        const NoPinEnv env(nullptr);
        pools.push_back(std::make_unique<ThreadPool>(n_cpus + 1));
    }
    for (auto& pool : pools) {
        INFO(pool->n_threads() << " threads");
        CHECK_FALSE(pool->pinned());
        for (const Seen& s : one_task_per_thread(*pool)) CHECK(CPU_EQUAL(&s.mask, &process));
    }
}

TEST_CASE("parked workers sleep until the next loop, which every thread still takes part in", "[unit]") {
    const cpu_set_t process = own_mask();
    ThreadPool pool(std::max(2, std::min(CPU_COUNT(&process), 4)));
    for (int round = 0; round < 20; ++round) {
        // A loop, then the caller parks its workers and blocks (as on a disk read) while they sleep.
        std::atomic<int64_t> sum{0};
        pool.run([&] {
            parallel_for(100, [&](int64_t i) { sum.fetch_add(i); });
            park_idle_workers();
            std::this_thread::sleep_for(std::chrono::milliseconds(round % 3));
        });
        CHECK(sum.load() == 4950);
        // A task per thread, each waiting for all the others: a worker that slept through the
        // loop's start would leave it waiting.
        CHECK(one_task_per_thread(pool).size() == size_t(pool.n_threads()));
    }
}

TEST_CASE("parallel_copy moves every byte, in whole and partial pieces, inside a pool and without one", "[unit]") {
    std::mt19937 rng(12);
    for (const size_t bytes : {size_t{0}, size_t{1000}, (size_t{3} << 20) + 777}) {
        INFO(bytes << " bytes");
        std::vector<uint8_t> src(bytes), dst(bytes + 1, 0xee);
        for (uint8_t& b : src) b = uint8_t(rng());
        ThreadPool pool(2);
        pool.run([&] { parallel_copy(dst.data(), src.data(), bytes); });
        CHECK(std::equal(src.begin(), src.end(), dst.begin()));
        CHECK(dst[bytes] == 0xee);  // nothing past the end
        std::fill(dst.begin(), dst.end(), uint8_t{0});
        parallel_copy(dst.data(), src.data(), bytes);
        CHECK(std::equal(src.begin(), src.end(), dst.begin()));
    }
}
