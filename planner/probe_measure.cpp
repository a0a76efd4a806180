#include "planner/probe_measure.h"

#include <fcntl.h>
#include <hwloc.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "cpu/matmul.h"
#include "cpu/thread_pool.h"
#include "runtime/core/error.h"

namespace strata::planner::probe_detail {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
uint64_t cache_size(hwloc_topology_t t, hwloc_obj_type_t type) {
    hwloc_obj_t o = hwloc_get_obj_by_type(t, type, 0);
    return o && o->attr ? o->attr->cache.size : 0;
}
}  // namespace

Topology read_topology() {
    Topology topo;
    hwloc_topology_t t;
    if (hwloc_topology_init(&t) != 0) return topo;
    if (hwloc_topology_load(t) == 0) {
        topo.n_cores = std::max(1, hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE));
        topo.n_pus = std::max(1, hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU));
        topo.n_numa = std::max(1, hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE));
        topo.l1d = cache_size(t, HWLOC_OBJ_L1CACHE);
        topo.l2 = cache_size(t, HWLOC_OBJ_L2CACHE);
        topo.l3 = cache_size(t, HWLOC_OBJ_L3CACHE);
        const char* model = nullptr;
        if (hwloc_obj_t pkg = hwloc_get_obj_by_type(t, HWLOC_OBJ_PACKAGE, 0)) model = hwloc_obj_get_info_by_name(pkg, "CPUModel");
        if (!model) model = hwloc_obj_get_info_by_name(hwloc_get_root_obj(t), "CPUModel");
        topo.cpu_name = model ? model : "";
    }
    hwloc_topology_destroy(t);
    return topo;
}

double measure_dram_read_gbps(size_t bytes, unsigned threads) {
    const unsigned n = std::max(1u, threads);
    const size_t words = std::max<size_t>(bytes / 8, n);
    std::vector<uint64_t> data(words);
    for (size_t i = 0; i < words; ++i) data[i] = i;  // touched: no page faults timed, no shared zero page
    const size_t per = (words + n - 1) / n;
    std::vector<uint64_t> sums(n);
    double best = 0;
    for (int rep = 0; rep < 3; ++rep) {
        const auto t0 = std::chrono::steady_clock::now();
        std::vector<std::thread> ts;
        for (unsigned k = 0; k < n; ++k)
            ts.emplace_back([&, k] {
                const size_t lo = std::min(words, k * per), hi = std::min(words, lo + per);
                uint64_t a = 0, b = 0, c = 0, d = 0;  // independent chains let the loads stream
                size_t i = lo;
                for (; i + 4 <= hi; i += 4) a += data[i], b ^= data[i + 1], c += data[i + 2], d ^= data[i + 3];
                for (; i < hi; ++i) a += data[i];
                sums[k] = a + b + c + d;
            });
        for (auto& th : ts) th.join();
        best = std::max(best, static_cast<double>(words * 8) / seconds_since(t0) / 1e9);
    }
    volatile uint64_t sink = 0;
    for (auto s : sums) sink = sink + s;
    return best;
}

double write_test_file(const std::filesystem::path& path, uint64_t bytes, bool& direct) {
    constexpr size_t kChunk = size_t{4} << 20;
    direct = true;
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EINVAL) {
        direct = false;
        fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    }
    if (fd < 0) throw IoError(fmt::format("cannot create the probe file '{}': {}", path.string(), std::strerror(errno)),
                              "pass --disk-dir DIR on the drive to measure");
    void* raw = nullptr;
    if (posix_memalign(&raw, 4096, kChunk) != 0) {
        ::close(fd);
        throw IoError("out of memory for the probe's write buffer");
    }
    std::unique_ptr<void, decltype(&std::free)> buf(raw, &std::free);
    std::memset(raw, 0x5a, kChunk);
    const auto t0 = std::chrono::steady_clock::now();
    for (uint64_t off = 0; off < bytes; off += kChunk) {
        const ssize_t w = ::pwrite(fd, raw, kChunk, static_cast<off_t>(off));
        if (w != static_cast<ssize_t>(kChunk)) {
            const int err = errno;
            ::close(fd);
            std::filesystem::remove(path);
            throw IoError(fmt::format("writing the probe file '{}' failed: {}", path.string(), w < 0 ? std::strerror(err) : "short write"),
                          "is the disk full? pass --disk-dir DIR or a smaller --disk-size");
        }
    }
    ::fsync(fd);
    const double s = seconds_since(t0);
    ::close(fd);
    return static_cast<double>((bytes + kChunk - 1) / kChunk * kChunk) / s / 1e9;
}

KernelRate measure_matmul(DType type, int threads, bool quick, uint64_t llc_bytes) {
    KernelRate r{type, 0, 0};
    const int64_t cols = 4096;
    const size_t rb = row_bytes(type, cols);
    // GEMV: about 3x the last-level cache, so DRAM is what is measured.
    const uint64_t target = quick ? 48ull << 20 : std::clamp<uint64_t>(3 * llc_bytes, 96ull << 20, 512ull << 20);
    const int64_t rows = std::max<int64_t>(256, static_cast<int64_t>(target / rb));
    std::vector<uint8_t> w(rb * static_cast<size_t>(rows), 0x11);  // 0x11: small finite scales and values
    std::vector<float> x(static_cast<size_t>(cols) * 64, 0.01f), y(static_cast<size_t>(rows) * 64);
    cpu::ThreadPool pool(threads);
    try {
        double best = 0;
        for (int rep = 0; rep < (quick ? 3 : 5); ++rep) {
            const auto t0 = std::chrono::steady_clock::now();
            pool.run([&] { cpu::matmul(type, w.data(), rows, cols, x.data(), 1, y.data()); });
            best = std::max(best, static_cast<double>(w.size()) / seconds_since(t0) / 1e9);
        }
        r.gemv_gbps = best;
        // GEMM: 64 tokens against 4096 rows (cache-resident weights: compute is what is measured).
        const int64_t g_rows = std::min<int64_t>(rows, 4096), tokens = 64;
        best = 0;
        for (int rep = 0; rep < (quick ? 2 : 3); ++rep) {
            const auto t0 = std::chrono::steady_clock::now();
            pool.run([&] { cpu::matmul(type, w.data(), g_rows, cols, x.data(), tokens, y.data()); });
            best = std::max(best, 2.0 * g_rows * cols * tokens / seconds_since(t0) / 1e9);
        }
        r.gemm_gflops = best;
    } catch (const BackendError&) {
        r.gemv_gbps = r.gemm_gflops = 0;  // no kernels for this type
    }
    return r;
}

}  // namespace strata::planner::probe_detail
