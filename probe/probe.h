#pragma once
// `strata probe`: measures this machine into a HardwareProfile — cores, caches and NUMA
// nodes (hwloc; RAM from sysconf, since hwloc under-reports it on balloon VMs), DRAM read and
// copy bandwidth, sequential O_DIRECT disk read/write, CPU GEMV/GEMM rates per weight type,
// and the GPUs the driver lists (rates from the catalog entry of the matching model).
// The profile is cached so `strata plan` need not measure again.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "planner/hardware_profile.h"

namespace strata::probe {

struct ProbeOptions {
    std::filesystem::path disk_dir;  // where to write the test file (the drive models live on); default: the temp dir
    uint64_t disk_bytes = 512ull << 20;
    uint64_t dram_bytes = 512ull << 20;
    int threads = 0;  // 0: every core
    // Q6_K: the output head and about half the ffn_down and attn_v of the Q4_K_M and Q5_K_M files people download.
    std::vector<DType> types = {DType::Q4_0, DType::Q4_1, DType::Q4_K, DType::Q6_K, DType::Q8_0, DType::F16};
    bool quick = false;  // smaller sizes, for tests and first-time planning
    // The simulated device's ops through the device interface: most of a quick probe's time (its
    // row-wise matmuls run one row after another on one thread). Without them a --device sim run
    // prices the device from the CPU's rates scaled to its threads.
    bool sim = true;
};

// Raised when a kernel the probe times, or a figure it takes, changes: a cached profile of another
// version is measured again. 1: the device's decode attention split by depth, op offload's
// copies of the CPU's layers over every thread (every figure the planner reads measured). 2: the
// device's decode GEMV with resident thread blocks, its GEMM rate from rows past what fills it.
inline constexpr int kProbeVersion = 2;

planner::HardwareProfile probe_machine(const ProbeOptions& opts);
// Whether a cached profile holds what this build's probe measures (its version's).
bool cached_profile_current(const planner::HardwareProfile& p);
// Sets p.gpu from the first device the CUDA runtime lists, or notes why there is none. Its
// rates come from the catalog entry; its H2D, D2H and memory bandwidths are measured when
// `measure_copies` (gpu/copy_rates.h: under a second), and its own ops through the device
// interface (probe/device_ops.h: GpuProfile::ops) when `measure_ops` is given.
void probe_gpu(planner::HardwareProfile& p, bool measure_copies, const ProbeOptions* measure_ops = nullptr);

// $XDG_CACHE_HOME/strata/hardware.json, else ~/.cache/strata/hardware.json.
std::filesystem::path profile_cache_path();
// The cached profile, or nullopt when absent or unreadable (a WARN says why).
std::optional<planner::HardwareProfile> load_cached_profile();
// The cached profile, or, the first time, a quick probe of this machine (a line on stderr says
// so; the disk measured where `disk_dir` is, when it exists), cached for the next commands.
// `source` says which.
planner::HardwareProfile measured_profile(std::string& source, const std::filesystem::path& disk_dir = {});
// Throws IoError / UsageError.
planner::HardwareProfile load_profile(const std::filesystem::path& path);
// Writes `p` as JSON to `path`: a file replaced whole (a temporary file renamed over it, so that
// readers never see half of it; a symlink's target likewise), a device or FIFO written into.
// Throws UsageError for a folder, IoError when it cannot be written (nothing left behind).
void save_profile(const planner::HardwareProfile& p, const std::filesystem::path& path);

}  // namespace strata::probe
