// `strata probe`: measure this machine for the planner and cache the profile.
#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "core/error.h"
#include "core/model_paths.h"
#include "planner/units.h"
#include "probe/probe.h"
#include "tools/cli_options.h"

namespace strata::cli {

using namespace strata::planner;

namespace {
// " (X on a 512-wide layer)" after a rate the probe also measured on a narrow layer's matrices,
// with its rate on one thread where measured.
std::string narrow_note(double narrow, double one_thread = 0) {
    if (narrow <= 0) return "";
    return fmt::format(" ({:.1f}{} on a {:.0f}-wide layer)", narrow,
                       one_thread > 0 ? fmt::format(", {:.1f} on one thread,", one_thread) : "", KernelRate::kNarrowCols);
}
// A device's own ops, as the cost model prices its placements.
void print_ops(const std::string& who, const DeviceOps& o) {
    fmt::print("{}: {:.1f} us an op ({:.1f} in a graph), a hop to the host and back {:.1f} us ({:.1f} as a step makes it, "
               "its threads idle before), copies {:.1f}/{:.1f} GB/s\n",
               who, o.op_overhead_us, o.graph_op_us, o.handoff_us, o.round_trip_us, o.h2d_gbps, o.d2h_gbps);
    for (const auto& r : o.rates)
        fmt::print("  matmul {:<5} 1 row {:6.1f} GB/s{}, 4 rows {:6.1f}{}, 8 rows {:6.1f}{}, 16 rows {:6.1f}{}, many rows {:7.1f} "
                   "GFLOPS{}\n",
                   dtype_name(r.type), r.gemv_gbps, narrow_note(r.gemv_narrow_gbps), r.rows4_gbps, narrow_note(r.rows4_narrow_gbps),
                   r.rows8_gbps, narrow_note(r.rows8_narrow_gbps), r.rows16_gbps, narrow_note(r.rows16_narrow_gbps), r.gemm_gflops,
                   narrow_note(r.gemm_narrow_gflops));
    for (const auto& a : o.attention)
        fmt::print("  decode attention at {:.0f} positions (32 heads, 8 KV heads of 128, F16): {:.1f} us\n", a.keys, a.us);
}
}  // namespace

int run_probe(const ProbeOptions& o) {
    probe::ProbeOptions po;
    po.quick = o.quick;
    po.threads = o.threads;
    std::error_code ec;
    if (!o.disk_dir.empty() && !std::filesystem::is_directory(o.disk_dir, ec))
        throw UsageError(fmt::format("--disk-dir '{}' is not a folder", o.disk_dir),
                         "name a folder on the disk to measure (the probe writes a file there and removes it)");
    if (!o.disk_dir.empty()) po.disk_dir = o.disk_dir;
    else if (std::filesystem::is_directory(models_dir(), ec)) po.disk_dir = models_dir();
    if (!o.disk_size.empty()) po.disk_bytes = parse_size(o.disk_size, "--disk-size", system_ram_bytes());
    fmt::print(stderr, "strata: measuring DRAM, CPU matmul rates and the disk at {}...\n",
               po.disk_dir.empty() ? std::filesystem::temp_directory_path().string() : po.disk_dir.string());
    const HardwareProfile p = probe::probe_machine(po);
    if (!o.no_cache) probe::save_profile(p, probe::profile_cache_path());
    if (!o.out.empty()) probe::save_profile(p, o.out);
    if (o.json) {
        std::cout << p.to_json() << "\n";
        return 0;
    }
    fmt::print("machine   {}\n", p.name);
    fmt::print("cpu       {} ({} cores, {} threads, {} NUMA node{}; L1d {}, L2 {}, L3 {}{})\n", p.cpu.name.empty() ? "?" : p.cpu.name,
               p.cpu.n_cores, p.cpu.n_threads, p.cpu.n_numa, p.cpu.n_numa == 1 ? "" : "s", format_size(p.cpu.l1d_bytes),
               format_size(p.cpu.l2_bytes), format_size(p.cpu.l3_bytes),
               p.cpu.cache_bytes ? fmt::format(", of which this program holds {} (measured)", format_size(p.cpu.cache_bytes))
                                 : std::string());
    fmt::print("dram      {}: read {:.1f} GB/s, copy {:.1f} GB/s\n", format_size(p.dram.capacity_bytes), p.dram.read_gbps, p.dram.copy_gbps);
    fmt::print("disk      {}: {} free, read {:.2f} GB/s, write {:.2f} GB/s\n", p.nvme.name, format_size(p.nvme.capacity_bytes),
               p.nvme.read_gbps, p.nvme.write_gbps);
    if (!p.nvme.read_depth_curve.empty()) {
        std::string depths;
        for (const auto& [bytes, gbps] : p.nvme.read_depth_curve)
            depths += fmt::format("{}{} {:.2f}", depths.empty() ? "" : ", ", format_size(bytes), gbps);
        fmt::print("          read with fewer in flight (streamed layers are priced at their ring's): {} GB/s\n", depths);
    }
    for (const auto& r : p.cpu.rates) {
        // A quick probe times no 4- and 8-token GEMV: left out rather than shown as 0.
        const std::string rows = r.rows4_gbps > 0 || r.rows8_gbps > 0
                                     ? fmt::format(", 4 tokens {:.1f} GB/s{}, 8 tokens {:.1f} GB/s{}", r.rows4_gbps,
                                                   narrow_note(r.rows4_narrow_gbps), r.rows8_gbps, narrow_note(r.rows8_narrow_gbps))
                                     : std::string();
        const std::string untile = r.untile_gbps > 0 ? fmt::format("; given back in the file's layout {:.1f} GB/s", r.untile_gbps) : "";
        fmt::print("matmul    {:<5} decode GEMV {:6.1f} GB/s of weights{}{}{}; prefill GEMM {:7.1f} GFLOPS{}{}\n", dtype_name(r.type),
                   r.gemv_gbps, r.gemv_thread_gbps > 0 ? fmt::format(" ({:.1f} on one thread)", r.gemv_thread_gbps) : "",
                   narrow_note(r.gemv_narrow_gbps, r.gemv_thread_narrow_gbps), rows, r.gemm_gflops, narrow_note(r.gemm_narrow_gflops),
                   untile);
    }
    if (p.gpu)
        fmt::print("gpu       {} {}: {:.0f} GB/s, {:.0f} TFLOPS, PCIe {} {:.1f}/{:.1f} GB/s\n", p.gpu->name, format_size(p.gpu->memory_bytes),
                   p.gpu->mem_gbps, p.gpu->fp16_tflops, p.gpu->pcie, p.gpu->h2d_gbps, p.gpu->d2h_gbps);
    else
        fmt::print("gpu       none\n");
    if (p.gpu && p.gpu->ops) print_ops("gpu", *p.gpu->ops);
    if (p.sim) print_ops(fmt::format("sim ({} thread{})", p.sim->n_threads, p.sim->n_threads == 1 ? "" : "s"), *p.sim);
    for (const auto& n : p.notes) fmt::print("note      {}\n", n);
    if (!o.no_cache) fmt::print("saved     {} (used by `strata plan`)\n", probe::profile_cache_path().string());
    return 0;
}

}  // namespace strata::cli
