#pragma once
// The probe's own measurements (those probe/io_rates does not provide): the hwloc
// topology, DRAM streaming reads, O_DIRECT sequential writes, and CPU matmul rates.
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "planner/hardware_profile.h"

namespace strata::probe {

struct Topology {
    std::string cpu_name;
    int n_cores = 1, n_pus = 1, n_numa = 1;
    uint64_t l1d = 0, l2 = 0, l3 = 0;
};
Topology read_topology();

// Reads `bytes` (huge-page backed, rounded to 2 MiB per thread) split over `threads` threads in
// three ways (several streams a thread prefetched into L1, the same into L2, one stream left to
// the hardware prefetchers; AVX-512 loads where the CPU has them): the fastest way's typical of
// five passes, GB/s, the rate the decode kernels can reach. Throws IoError when the buffer cannot
// be allocated.
double measure_dram_read_gbps(size_t bytes, unsigned threads);
// The last-level cache as this program gets it, and the read rates it is read off: the largest buffer (from 4 MiB, doubling, up
// to twice `reported`, the size the topology gives, within 128..512 MiB; 128 MiB `quick`) that one thread reads
// again and again within a quarter of the way from the smallest buffer's rate to the largest's;
// 0 when none is. On a VM sharing its host's cache this is far less than the host's L3 the
// topology reports (300 MiB reported, 32 MiB measured).
struct CacheCurve {
    uint64_t fits = 0;                               // the cache as measured (0: none)
    std::vector<std::pair<double, double>> rates;  // (bytes, GB/s), sizes ascending
};
CacheCurve measure_cache(uint64_t reported, bool quick);
// The buffer for measure_dram_read_gbps: RAM / 8 within 256 MiB .. 2 GiB, so it is far larger
// than the last-level caches VMs report (480 MiB on some) without crowding a small machine.
size_t dram_read_probe_bytes(uint64_t ram_bytes);

// Writes `bytes` to a new file at `path` with O_DIRECT (buffered + fsync where the file
// system refuses O_DIRECT; `direct` says which), returning GB/s. Throws IoError.
double write_test_file(const std::filesystem::path& path, uint64_t bytes, bool& direct);

// Decode GEMV (weight bytes/s, on a matrix about 4x the last-level cache `llc_bytes`, within
// 128..512 MiB) and prefill GEMM through cpu::matmul at 64 and 16 tokens, split into flops/s per
// token and the rate of the per-call pass over the weights (pack_gbps). Returns rates of 0 for
// a type without kernels.
// `tiled`: the weights rewritten as the engine keeps resident CPU weights; false: as laid out in
// the file (the simulated device's copies).
planner::KernelRate measure_matmul(DType type, int threads, bool quick, uint64_t llc_bytes, bool tiled = true);

}  // namespace strata::probe
