#include "probe/measure.h"

#include <fcntl.h>
#include <hwloc.h>
#include <immintrin.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "cpu/matmul.h"
#include "cpu/quant.h"
#include "cpu/thread_pool.h"
#include "probe/huge_pages.h"
#include "probe/narrow_layer.h"
#include "probe/typical.h"

namespace strata::probe {

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

namespace {
// How a pass reads its range. Which way is fastest depends on the CPU, so the DRAM's rate is the
// fastest way's (what a well-written kernel gets): on the 2-core AMD EPYC VM here one stream of
// 64-byte loads read 32-35 GB/s, four streams prefetched into L1 22-25, into L2 28-30.
//  - Streams, StreamsL2: kStreams sequential streams per thread, each over its own contiguous
//    part of the range, 4 cache lines per stream per step with a software prefetch kPrefetchBytes
//    ahead into L1 or L2. Several streams keep more misses in flight than one, and the prefetch
//    crosses the 4 KiB pages where a hardware prefetcher stops (the decode kernels do the same).
//  - OneStream: one stream of 64-byte loads (8-byte ones without AVX-512), left to the hardware
//    prefetchers.
//  - Plain: one stream of 8-byte loads (the cache curve's: its rate falls off clearly once the
//    buffer leaves the cache).
enum class ReadWay { Streams, StreamsL2, OneStream, Plain };
constexpr size_t kStreams = 4, kStep = 256, kPrefetchBytes = 4096;

template <size_t S, int Hint>
__attribute__((target("avx512f"))) uint64_t read_avx512(const uint8_t* p, size_t bytes) {
    const size_t per = bytes / S / kStep * kStep;
    __m512i acc[S];
    for (auto& a : acc) a = _mm512_setzero_si512();
    for (size_t off = 0; off < per; off += kStep)
        for (size_t s = 0; s < S; ++s) {
            const uint8_t* q = p + s * per + off;
            for (size_t l = 0; l < kStep; l += 64) {
                if constexpr (Hint >= 0) _mm_prefetch(reinterpret_cast<const char*>(q + kPrefetchBytes + l), static_cast<_mm_hint>(Hint));
                acc[s] = _mm512_xor_si512(acc[s], _mm512_load_si512(q + l));
            }
        }
    for (size_t s = 1; s < S; ++s) acc[0] = _mm512_xor_si512(acc[0], acc[s]);
    alignas(64) uint64_t lanes[8];
    _mm512_store_si512(lanes, acc[0]);
    uint64_t sum = 0;
    for (uint64_t v : lanes) sum ^= v;
    return sum;
}

// One stream of 8-byte loads, left to the hardware prefetcher.
uint64_t read_plain(const uint8_t* p, size_t bytes) {
    const auto* q = reinterpret_cast<const uint64_t*>(p);
    uint64_t a = 0, b = 0, c = 0, d = 0;
    for (size_t w = 0; w + 4 <= bytes / 8; w += 4) a ^= q[w], b ^= q[w + 1], c ^= q[w + 2], d ^= q[w + 3];
    return a ^ b ^ c ^ d;
}

// Without AVX-512: the streams with 8-byte loads.
template <int Locality>
uint64_t read_scalar(const uint8_t* p, size_t bytes) {
    const size_t per = bytes / kStreams / kStep * kStep;
    uint64_t acc[kStreams] = {};
    for (size_t off = 0; off < per; off += kStep)
        for (size_t s = 0; s < kStreams; ++s) {
            const auto* q = reinterpret_cast<const uint64_t*>(p + s * per + off);
            __builtin_prefetch(p + s * per + off + kPrefetchBytes, 0, Locality);
            for (size_t w = 0; w < kStep / 8; ++w) acc[s] ^= q[w];
        }
    return acc[0] ^ acc[1] ^ acc[2] ^ acc[3];
}

uint64_t read(ReadWay way, const uint8_t* p, size_t bytes) {
    static const bool avx512 = __builtin_cpu_supports("avx512f");
    switch (way) {
        case ReadWay::Streams: return avx512 ? read_avx512<kStreams, _MM_HINT_T0>(p, bytes) : read_scalar<3>(p, bytes);
        case ReadWay::StreamsL2: return avx512 ? read_avx512<kStreams, _MM_HINT_T1>(p, bytes) : read_scalar<2>(p, bytes);
        case ReadWay::OneStream: return avx512 ? read_avx512<1, -1>(p, bytes) : read_plain(p, bytes);
        case ReadWay::Plain: break;
    }
    return read_plain(p, bytes);
}
}  // namespace

size_t dram_read_probe_bytes(uint64_t ram_bytes) {
    return static_cast<size_t>(std::clamp<uint64_t>(ram_bytes / 8, 256ull << 20, 2ull << 30));
}

namespace {

constexpr size_t kPage = HugePages::kPage;

// A buffer of whole 2 MiB pages per thread, each thread's part touched by that thread.
struct ReadBuffer {
    HugePages pages;
    uint8_t* data = nullptr;
    size_t per = 0;  // bytes of each thread's part
    unsigned n = 1;

    ReadBuffer(size_t bytes, unsigned threads)
        : pages(std::max<size_t>(1, bytes / std::max(1u, threads) / kPage) * kPage * std::max(1u, threads), "DRAM probe buffer"),
          n(std::max(1u, threads)) {
        per = std::max<size_t>(1, bytes / n / kPage) * kPage;
        data = pages.data;
        std::vector<std::thread> ts;
        for (unsigned k = 0; k < n; ++k) ts.emplace_back([this, k] { std::memset(data + k * per, static_cast<int>(k + 1), per); });
        for (auto& th : ts) th.join();
    }

    // The typical rate (probe/typical.h) of `reps` passes in which every thread reads the first
    // `bytes_each` of its part `way`, after an untimed one.
    double read_gbps(size_t bytes_each, int reps, ReadWay way) const {
        std::vector<uint64_t> sums(n);
        auto pass = [&] {
            std::vector<std::thread> ts;
            for (unsigned k = 0; k < n; ++k)
                ts.emplace_back([&, k] {
                    const uint8_t* p = data + k * per;
                    sums[k] = read(way, p, bytes_each);
                });
            for (auto& th : ts) th.join();
        };
        pass();
        std::vector<double> rates;
        for (int rep = 0; rep < reps; ++rep) {
            const auto t0 = std::chrono::steady_clock::now();
            pass();
            rates.push_back(static_cast<double>(bytes_each * n) / seconds_since(t0) / 1e9);
        }
        volatile uint64_t sink = 0;
        for (auto s : sums) sink = sink + s;
        return median(std::move(rates));
    }
};

}  // namespace

double measure_dram_read_gbps(size_t bytes, unsigned threads) {
    const ReadBuffer buf(bytes, threads);
    double best = 0;
    for (ReadWay way : {ReadWay::Streams, ReadWay::StreamsL2, ReadWay::OneStream}) best = std::max(best, buf.read_gbps(buf.per, 5, way));
    return best;
}

CacheCurve measure_cache(uint64_t reported, bool quick) {
    // One thread, plain loads without software prefetch: the rate falls off clearly once the
    // buffer leaves the cache (with every thread and prefetched streams the two rates are close).
    const size_t most = quick ? 128ull << 20 : std::clamp<uint64_t>(2 * reported, 128ull << 20, 512ull << 20);
    const ReadBuffer buf(most, 1);
    CacheCurve c;
    for (size_t bytes = 4ull << 20; bytes <= buf.per; bytes *= 2) {
        const int reps = static_cast<int>(std::clamp<size_t>((256ull << 20) / bytes, 3, 32));
        c.rates.emplace_back(static_cast<double>(bytes), buf.read_gbps(bytes, reps, ReadWay::Plain));
    }
    // The largest size read within a quarter of the way from the smallest's rate to the
    // largest's: the rate falls gradually where a shared cache holds part of the buffer.
    const double threshold = c.rates.front().second - (c.rates.front().second - c.rates.back().second) / 4;
    for (const auto& [bytes, gbps] : c.rates) {
        if (gbps < threshold) break;
        c.fits = static_cast<uint64_t>(bytes);
    }
    return c;
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

planner::KernelRate measure_matmul(DType type, int threads, bool quick, uint64_t llc_bytes, bool tile) {
    planner::KernelRate r{type, 0, 0, 0, 0};
    const int64_t cols = 4096;
    const size_t rb = row_bytes(type, cols);
    // GEMV: about 4x the last-level cache, so DRAM is what is measured.
    const uint64_t target = quick ? 48ull << 20 : std::clamp<uint64_t>(4 * llc_bytes, 128ull << 20, 512ull << 20);
    const int64_t rows = std::max<int64_t>(256, static_cast<int64_t>(target / rb));
    const size_t w_bytes = rb * static_cast<size_t>(rows);
    const HugePages w_pages(w_bytes, "GEMV probe matrix");
    const std::span<uint8_t> w(w_pages.data, w_bytes);
    std::fill(w.begin(), w.end(), uint8_t{0x11});  // small finite scales and values
    std::vector<float> x(static_cast<size_t>(cols) * 64, 0.01f), y(static_cast<size_t>(rows) * 64);
    cpu::ThreadPool pool(threads);
    try {
        // Laid out as the engine keeps resident weights (runtime/weights/weight_store: tile_for_cpu).
        bool tiled = false;
        if (tile) pool.run([&] { tiled = cpu::tile_weights(type, w.data(), rows, cols); });
        auto decode_gbps = [&](cpu::ThreadPool& on, int64_t tokens) {
            const auto t0 = std::chrono::steady_clock::now();
            on.run([&] { cpu::matmul(type, w.data(), rows, cols, x.data(), tokens, y.data(), false, tiled); });
            return static_cast<double>(w.size()) / seconds_since(t0) / 1e9;
        };
        auto gemv_gbps = [&](cpu::ThreadPool& on, int64_t tokens = 1) {
            std::vector<double> gemv;
            for (int rep = 0; rep < (quick ? 3 : 5); ++rep) gemv.push_back(decode_gbps(on, tokens));
            return median(std::move(gemv));
        };
        r.gemv_gbps = gemv_gbps(pool);
        // Decode calls of several tokens (a batch's step, a verified draft): their arithmetic
        // does not hide under the read. A quick probe leaves them out (priced as before): its
        // three passes beside other work gave 8 tokens a multiple of one token's time too small
        // to trust, which flipped a batch's device-or-CPU choice.
        if (!quick) {
            r.rows4_gbps = gemv_gbps(pool, 4);
            r.rows8_gbps = gemv_gbps(pool, 8);
        }
        // One thread alone, for a pool of fewer threads (HardwareProfile::on_cpu_threads).
        if (pool.n_threads() > 1) {
            cpu::ThreadPool one(1);
            r.gemv_thread_gbps = gemv_gbps(one);
        } else {
            r.gemv_thread_gbps = r.gemv_gbps;
        }
        // A decode matmul's cost beyond its bytes (hand-off, the DRAM stream starting, the tasks'
        // uneven ends), which small matrices pay in full: the same weights swept in 64-row calls
        // and in 1024-row calls, one sweep right after the other so that both see the machine
        // alike; the difference per extra call, the median over the pairs (a busy moment skews
        // one pair, not the median). Rows of 4096 and of 512 values: the part that grows with a
        // row's bytes (each thread's first rows wait for DRAM) and the part that does not.
        auto call_s = [&](const uint8_t* weights, int64_t n_rows, int64_t n_cols, bool as_tiled) {
            const size_t row_b = row_bytes(type, n_cols);
            auto sweep_s = [&](int64_t call_rows) {
                const int64_t n_calls = n_rows / call_rows;
                const auto t0 = std::chrono::steady_clock::now();
                pool.run([&] {
                    for (int64_t i = 0; i < n_calls; ++i)
                        cpu::matmul(type, weights + i * call_rows * row_b, call_rows, n_cols, x.data(), 1, y.data(), false,
                                    as_tiled);
                });
                return seconds_since(t0);
            };
            constexpr int64_t kSmall = 64, kLarge = 1024;
            // Each sweep is n calls of `call_rows` rows: n * call + n * call_rows * row; the two give call.
            const double n_s = static_cast<double>(n_rows / kSmall), n_l = static_cast<double>(n_rows / kLarge);
            const double rows_s = n_s * kSmall, rows_l = n_l * kLarge;
            std::vector<double> per_call;
            for (int rep = 0; rep < (quick ? 3 : 5); ++rep) {
                const double small = sweep_s(kSmall), large = sweep_s(kLarge);
                per_call.push_back((small * rows_l - large * rows_s) / (n_s * rows_l - n_l * rows_s));
            }
            return std::max(0.0, median(std::move(per_call)));
        };
        const size_t narrow_rb = row_bytes(type, kNarrow);
        const int64_t narrow_rows = static_cast<int64_t>(w.size() / 2 / narrow_rb);  // still past the caches
        const size_t narrow_bytes = narrow_rb * static_cast<size_t>(narrow_rows);
        const HugePages narrow_pages(narrow_bytes, "GEMV probe matrix");
        const std::span<uint8_t> narrow(narrow_pages.data, narrow_bytes);
        std::fill(narrow.begin(), narrow.end(), uint8_t{0x11});
        bool narrow_tiled = false;
        if (tile) pool.run([&] { narrow_tiled = cpu::tile_weights(type, narrow.data(), narrow_rows, kNarrow); });
        const double wide_s = call_s(w.data(), rows, cols, tiled), narrow_s = call_s(narrow.data(), narrow_rows, kNarrow, narrow_tiled);
        const double per_byte = std::max(0.0, (wide_s - narrow_s) / static_cast<double>(rb - narrow_rb));
        r.call_ns_per_row_byte = per_byte * 1e9;
        r.call_us = std::max(0.0, narrow_s - per_byte * static_cast<double>(narrow_rb)) * 1e6;
        // A narrow layer's decode beyond those costs, on every thread and on one (a quick probe
        // leaves it out: priced at the wide rates).
        if (!quick) measure_narrow_gemv(type, pool, tile, w.size(), r, decode_gbps);
        // GEMM: 64 and 16 tokens against 4096 rows (cache-resident weights: compute is what is
        // measured); the difference gives the rate per token. The pass over the weights (packing
        // tiles) is what 16 tokens over all the rows take beyond that: the engine's weights come
        // from DRAM, and packing them from there ran at half the cache-resident rate here.
        const int64_t g_rows = std::min<int64_t>(rows, 4096);
        auto gemm_s = [&](int64_t tokens, int64_t n_rows) {
            std::vector<double> s;
            for (int rep = 0; rep < (quick ? 3 : 5); ++rep) {
                const auto t0 = std::chrono::steady_clock::now();
                pool.run([&] { cpu::matmul(type, w.data(), n_rows, cols, x.data(), tokens, y.data(), false, tiled); });
                s.push_back(seconds_since(t0));
            }
            return median(std::move(s));
        };
        const double t64 = gemm_s(64, g_rows), t16 = gemm_s(16, g_rows), flops_per_token = 2.0 * g_rows * cols;
        const double per_token = (t64 - t16) / 48;
        // A quick probe leaves the pass over the weights out (pack_gbps 0: priced at the GEMV rate).
        const double t16_all = quick ? 0 : gemm_s(16, rows), compute_all = 16 * per_token * static_cast<double>(rows) / g_rows;
        if (quick && per_token > 0 && t16 > 16 * per_token) {
            r.gemm_gflops = flops_per_token / per_token / 1e9;
        } else if (per_token > 0 && t16 > 16 * per_token && t16_all > compute_all) {
            r.gemm_gflops = flops_per_token / per_token / 1e9;
            r.pack_gbps = static_cast<double>(w.size()) / (t16_all - compute_all) / 1e9;
        } else {
            r.gemm_gflops = flops_per_token * 64 / t64 / 1e9;  // too noisy to split: the 64-token rate alone
        }
        // A quick probe leaves the narrow layer out (priced at the wide rate).
        if (!quick && cols == static_cast<int64_t>(planner::KernelRate::kWideCols) && rows >= cols)
            r.gemm_narrow_gflops = r.gemm_gflops * narrow_over_wide(type, pool, tile, w.data(), tiled);
        // The weights given back as the file lays them out (op offload's copies to a device): the
        // tiles untiled, or the rows copied where nothing was tiled; none where the tiles cannot
        // be given back (Q8_K's), which op offload reads from the file again. Half the matrix into
        // the narrow one's memory, no longer needed: from DRAM into DRAM.
        const int64_t untile_rows = static_cast<int64_t>(narrow.size() / rb) / 16 * 16;
        if (untile_rows > 0 && cpu::can_untile(type, cols)) {
            const size_t bytes = rb * static_cast<size_t>(untile_rows);
            std::vector<double> s;
            for (int rep = 0; rep < (quick ? 3 : 5); ++rep) {
                const auto t0 = std::chrono::steady_clock::now();
                pool.run([&] {
                    if (!tiled) cpu::parallel_copy(narrow.data(), w.data(), bytes);
                    else cpu::untile_weights(type, w.data(), narrow.data(), untile_rows, cols);
                });
                s.push_back(seconds_since(t0));
            }
            r.untile_gbps = static_cast<double>(bytes) / median(std::move(s)) / 1e9;
        }
    } catch (const BackendError&) {
        r.gemv_gbps = r.gemm_gflops = 0;  // no kernels for this type
    }
    return r;
}

}  // namespace strata::probe
