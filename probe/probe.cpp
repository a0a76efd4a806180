#include "probe/probe.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/cache_dir.h"
#include "core/error.h"
#include "core/file_write.h"
#include "core/log.h"
#include "gpu/copy_rates.h"
#include "gpu/cuda_devices.h"
#include "gpu/cuda_host.h"
#include "gpu/device.h"
#include "planner/catalog.h"
#include "planner/units.h"
#include "probe/cpu_costs.h"
#include "probe/io_rates.h"
#include "probe/machine_load.h"
#include "probe/measure.h"
#include "probe/device_ops.h"
#include "probe/typical.h"
#include "storage/budget.h"

namespace strata::probe {

namespace {

// Reads in flight the disk is measured at, the deepest last (read_gbps).
constexpr unsigned kReadDepths[] = {1, 2, 4, 8, 32};

void probe_disk(const ProbeOptions& o, planner::HardwareProfile& p) {
    const auto dir = o.disk_dir.empty() ? std::filesystem::temp_directory_path() : o.disk_dir;
    struct statvfs vfs {};
    if (::statvfs(dir.c_str(), &vfs) == 0) p.nvme.capacity_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
    p.nvme.name = "disk at " + dir.string();
    p.nvme.path = dir.string();
    const uint64_t bytes = o.quick ? std::min<uint64_t>(o.disk_bytes, 64u << 20) : o.disk_bytes;
    const auto file = dir / fmt::format(".strata-probe-{}.bin", ::getpid());
    bool direct = false;
    try {
        p.nvme.write_gbps = write_test_file(file, bytes, direct);
        // The typical of three passes (probe/typical.h): a virtual or shared drive's rate swings
        // by 2-3x from pass to pass, and a run streaming for seconds sees it swing too. Each pass
        // reads at every depth, so a swing does not fall on one depth alone: a ring of a few
        // layers keeps a few MiB in flight, far fewer than the deepest.
        std::vector<std::vector<double>> reads(std::size(kReadDepths));
        for (int pass = 0; pass < 3; ++pass)
            for (size_t d = 0; d < std::size(kReadDepths); ++d)
                reads[d].push_back(measure_sequential_read_gbps(file, bytes, kReadDepths[d]));
        p.nvme.read_depth_curve.clear();
        for (size_t d = 0; d < std::size(kReadDepths); ++d)
            p.nvme.read_depth_curve.emplace_back(double(kReadDepths[d]) * double(kReadRequestBytes), median(std::move(reads[d])));
        p.nvme.read_gbps = p.nvme.read_depth_curve.back().second;
    } catch (...) {
        std::filesystem::remove(file);
        throw;
    }
    std::filesystem::remove(file);
    p.notes.push_back(fmt::format("disk: {} written {} and read back (median of 3) with {} (1 MiB requests; depth 32, and "
                                  "1, 2, 4, 8 for read_depth_curve) in {}", planner::format_size(bytes),
                                  direct ? "with O_DIRECT" : "buffered + fsync (no O_DIRECT here)",
                                  "measure_sequential_read_gbps", dir.string()));
}

// The GPU's own ops through the device interface, with its copies measured from page-locked
// memory while the CPU streams DRAM: what the cost model prices its placements from.
void measure_gpu_ops(planner::GpuProfile& g, int index, const ProbeOptions& o, uint64_t llc_bytes,
                     std::vector<std::string>& notes) {
    try {
        gpu::install_cuda_host_pinner();
        const uint64_t bytes = std::min<uint64_t>(device_ops_bytes(o.quick, llc_bytes), g.memory_bytes / 2);
        auto dev = gpu::make_cuda_device(index, bytes);
        g.ops = measure_device_ops(*dev, o.types, o.quick, llc_bytes);
        if (g.ops->h2d_gbps > 0) g.h2d_gbps = g.ops->h2d_gbps;
        if (g.ops->d2h_gbps > 0) g.d2h_gbps = g.ops->d2h_gbps;
        g.handoff_us = g.ops->hop_us();
        notes.push_back(fmt::format("gpu: its matmuls, attention, launches ({:.1f} us an op, {:.1f} in a graph) and copies "
                                    "measured through the device interface", g.ops->op_overhead_us, g.ops->graph_op_us));
    } catch (const Error& e) {
        notes.push_back(fmt::format("gpu: its ops not measured ({}); it is priced from the catalog", e.what()));
    }
}

}  // namespace

void probe_gpu(planner::HardwareProfile& p, bool measure_copies, const ProbeOptions* measure_ops) {
    const gpu::DeviceList list = gpu::list_devices();
    if (list.devices.empty()) {
        p.notes.push_back("gpu: none (" + list.why_none + ")");
        return;
    }
    const gpu::DeviceInfo& d = list.devices.front();
    const planner::Catalog& cat = planner::Catalog::builtin();
    planner::GpuProfile g;
    g.name = d.name;
    g.memory_bytes = d.total_bytes;
    if (const planner::GpuEntry* e = cat.match_gpu_device(d.name)) {
        const planner::PcieEntry* link = cat.find_pcie(e->pcie);
        g.mem_gbps = e->mem_gbps * cat.efficiency.gpu_mem;
        g.fp16_tflops = e->fp16_tflops * cat.efficiency.gpu_gemm;
        g.pcie = e->pcie + " x16";
        g.h2d_gbps = g.d2h_gbps = (link ? link->x16_gbps : 31.5) * cat.efficiency.pcie;
        p.notes.push_back(fmt::format("gpu: {} matched catalog entry {}; its FLOPS are the catalog's", d.name, e->name));
    } else {
        // An unknown part: assume a modest PCIe Gen4 card rather than guess high.
        g.mem_gbps = 400, g.fp16_tflops = 30, g.pcie = "gen4 x16 (assumed)", g.h2d_gbps = g.d2h_gbps = 20;
        p.notes.push_back(fmt::format("gpu: {} is not in the catalog; rates assumed (400 GB/s, 30 TFLOPS, 20 GB/s PCIe)", d.name));
    }
    if (measure_copies) {
        try {
            const gpu::CopyRates r = gpu::measure_copy_rates(d.index);
            g.h2d_gbps = r.h2d_gbps, g.d2h_gbps = r.d2h_gbps, g.mem_gbps = r.device_gbps;
            p.notes.push_back(fmt::format("gpu: measured H2D {:.1f} GB/s and D2H {:.1f} GB/s from page-locked memory, "
                                          "device copy {:.0f} GB/s (256 MiB, best of 5)", r.h2d_gbps, r.d2h_gbps, r.device_gbps));
        } catch (const BackendError& e) {
            p.notes.push_back(fmt::format("gpu: copy rates not measured ({}); the catalog's are used", e.what()));
        }
    } else {
        p.notes.push_back("gpu: bandwidths from the catalog (`strata probe` measures them)");
    }
    if (measure_ops) measure_gpu_ops(g, d.index, *measure_ops, p.cpu.llc_bytes(), p.notes);
    if (list.devices.size() > 1) p.notes.push_back(fmt::format("gpu: {} devices found; the planner uses device 0", list.devices.size()));
    p.gpu = g;
}

planner::HardwareProfile probe_machine(const ProbeOptions& o) {
    const OtherLoad others;
    planner::HardwareProfile p;
    p.source = "probe";
    p.probe_version = kProbeVersion;
    const Topology topo = read_topology();
    const int threads = o.threads > 0 ? o.threads : topo.n_pus;
    p.cpu.name = topo.cpu_name;
    p.cpu.n_cores = topo.n_cores;
    p.cpu.n_threads = threads;
    p.cpu.n_numa = topo.n_numa;
    p.cpu.l1d_bytes = topo.l1d, p.cpu.l2_bytes = topo.l2, p.cpu.l3_bytes = topo.l3;
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    p.name = host;

    // RAM from sysconf: hwloc's NUMA figure is wrong on balloon-backed VMs (shared/env.md).
    p.dram.capacity_bytes = system_ram_bytes();
    p.dram.kind = "measured";
    const size_t dram_bytes = o.quick ? std::min<uint64_t>(o.dram_bytes, 128u << 20) : o.dram_bytes;
    // The cache as this program gets it; the sizes below that must pass the caches go by it.
    const CacheCurve cache = measure_cache(topo.l3 ? topo.l3 : topo.l2, o.quick);
    p.cpu.cache_bytes = cache.fits;
    p.cpu.cache_curve = cache.rates;
    const uint64_t llc = p.cpu.llc_bytes();
    // Quick or not, the read covers four last-level caches at least, so it measures DRAM.
    const size_t full = dram_read_probe_bytes(p.dram.capacity_bytes);
    const size_t read_bytes = o.quick ? std::min<size_t>(full, std::max<size_t>(dram_bytes, 4 * llc)) : full;
    p.dram.read_gbps = measure_dram_read_gbps(read_bytes, static_cast<unsigned>(threads));
    p.dram.copy_gbps = measure_dram_copy_gbps(dram_bytes, static_cast<unsigned>(threads));
    p.notes.push_back(fmt::format("dram: capacity from sysconf (not hwloc NUMA); read = {}-thread prefetched streams over {}, "
                                  "copy = memcpy of {}", threads, planner::format_size(static_cast<double>(read_bytes)),
                                  planner::format_size(static_cast<double>(dram_bytes))));

    for (DType t : o.types) {
        const planner::KernelRate r = measure_matmul(t, threads, o.quick, llc);
        if (r.gemv_gbps > 0) p.cpu.rates.push_back(r);
    }
    // Fallbacks for types not measured: the best rates seen.
    if (!p.cpu.rates.empty()) {
        p.cpu.gemv_gbps = p.cpu.gemm_gflops = 0;
        for (const auto& r : p.cpu.rates)
            p.cpu.gemv_gbps = std::max(p.cpu.gemv_gbps, r.gemv_gbps), p.cpu.gemm_gflops = std::max(p.cpu.gemm_gflops, r.gemm_gflops);
    }
    // Attention reads the KV cache from DRAM (a long context's cache is far larger than the
    // caches); its arithmetic is the tile model's, measured through cpu::attention.
    p.cpu.attention_gbps = p.dram.read_gbps;
    p.cpu.attention_gflops = p.cpu.gemm_gflops_for(DType::F16);
    p.cpu.attention_tile = measure_attention_tile(threads, {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0}, o.quick, llc);
    p.cpu.vector = measure_vector_cost(threads, o.quick);
    p.cpu.loop_us = measure_loop_us(threads, o.quick);
    p.notes.push_back(fmt::format("cpu: GEMV/GEMM through cpu::matmul; attention tiles through cpu::attention (F16 at head_dim "
                                  "64 and 128, 1 and 8 query rows; each KV type); a token's vector ops {:.0f} ns + {:.3f} ns a value "
                                  "on a thread; a parallel loop's hand-off {:.2f} us",
                                  p.cpu.vector.ns_per_token, p.cpu.vector.ns_per_value, p.cpu.loop_us));

    if (o.sim) {
        p.sim = measure_sim_device(o.types, gpu::default_sim_threads(), o.quick, llc);
        p.notes.push_back(fmt::format("sim: the simulated device on {} threads, its matmuls, attention, launches and copies "
                                      "measured through the device interface", p.sim->n_threads));
    } else {
        p.notes.push_back("sim: not measured (its rates are the CPU's scaled to its threads; `strata probe` measures them)");
    }

    probe_disk(o, p);
    probe_gpu(p, true, &o);
    if (const std::string busy = busy_machine_note(others.cores(), topo.n_pus); !busy.empty()) {
        STRATA_LOG_WARN("probe: {}", busy);
        p.notes.push_back(busy);
    }
    p.validate();
    return p;
}

std::filesystem::path profile_cache_path() {
    return cache_dir() / "hardware.json";
}

planner::HardwareProfile load_profile(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw IoError(fmt::format("cannot read the hardware profile '{}'", path.string()), "make one with `strata probe -o FILE`");
    std::stringstream ss;
    ss << in.rdbuf();
    return planner::HardwareProfile::from_json(ss.str());
}

std::optional<planner::HardwareProfile> load_cached_profile() {
    const auto path = profile_cache_path();
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return std::nullopt;
    try {
        return load_profile(path);
    } catch (const Error& e) {
        STRATA_LOG_WARN("planner: ignoring the cached profile {}: {}", path.string(), e.what());
        return std::nullopt;
    }
}

bool cached_profile_current(const planner::HardwareProfile& p) { return p.probe_version == kProbeVersion; }

planner::HardwareProfile measured_profile(std::string& source, const std::filesystem::path& disk_dir) {
    auto cached = load_cached_profile();
    if (cached && cached_profile_current(*cached)) {
        source = "the cached probe " + profile_cache_path().string();
        return *cached;
    }
    if (cached)
        std::fprintf(stderr, "strata: the cached hardware profile was measured by another version of the probe or "
                             "its kernels; measuring this machine again (a quick probe: a few seconds; `strata probe` "
                             "measures it more closely)...\n");
    else
        std::fprintf(stderr, "strata: measuring this machine once for the planner (a quick probe: a few seconds; "
                             "`strata probe` measures it more closely)...\n");
    // What every run needs: the CPU, the disk and a GPU; the simulated device (a test device)
    // only where `strata probe` is asked to measure it, as it would take most of the time.
    ProbeOptions po;
    po.quick = true;
    po.sim = false;
    std::error_code ec;
    if (!disk_dir.empty() && std::filesystem::is_directory(disk_dir, ec)) po.disk_dir = disk_dir;
    planner::HardwareProfile hw = probe_machine(po);
    try {
        save_profile(hw, profile_cache_path());
        source = "a quick probe of this machine, now cached in " + profile_cache_path().string();
    } catch (const Error& e) {  // IoError, or UsageError for a folder in its place
        // The run needs the figures, not the cache: the next run measures again.
        STRATA_LOG_WARN("planner: the quick probe's figures are used but not kept: {}", e.what());
        source = "a quick probe of this machine (not cached)";
    }
    return hw;
}

void save_profile(const planner::HardwareProfile& p, const std::filesystem::path& path) {
    std::error_code ec;
    if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);  // the cache's, on a first run
    write_file_whole(path, p.to_json() + "\n", "the hardware profile", "is the disk full, or the folder read-only? name another file with -o");
}

}  // namespace strata::probe
