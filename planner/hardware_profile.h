#pragma once
// What the planner knows about a machine: capacities and *effective* rates (what a program
// actually gets, not the vendor's peak) of the CPU, DRAM, GPU and NVMe. Made by `strata probe`
// (measured), by the catalog (peak × documented efficiency) or read back from JSON.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/dtype.h"

namespace strata::planner {

// Measured CPU matmul rates for one weight type.
struct KernelRate {
    DType type = DType::F32;
    double gemv_gbps = 0;    // weight bytes per second in decode (one token)
    double gemm_gflops = 0;  // flops per second in prefill (many tokens)
    // With it, a matmul of more than 4 tokens takes weight bytes / pack_gbps (packing the
    // weights into tiles, once a call) + flops / gemm_gflops; 0: flops / gemm_gflops alone.
    double pack_gbps = 0;
    // A decode matmul's cost beyond its bytes: call_us + call_ns_per_row_byte x the bytes of one
    // row (its first rows per thread wait for DRAM before the streams are under way, so wide
    // rows cost more); 0s: not measured.
    double call_us = 0;
    double call_ns_per_row_byte = 0;
    // The GEMM rate on the matrices of a layer kNarrowCols wide (q, k, v, the output, gate, up,
    // down at 256 tokens): small matrices give each thread few tiles; 0: not measured.
    double gemm_narrow_gflops = 0;
    static constexpr double kWideCols = 4096, kNarrowCols = 512;  // the widths gemm_gflops and it are measured at
    // A decode call of eight rows (the CPU's eight tokens, its weights tiled as the engine holds
    // them), weight bytes per second over the matrix; 0: not measured (profiles made before it).
    double rows8_gbps = 0;
    // The CPU's decode rate on one thread alone, its weights tiled as the engine holds them: what a
    // pool of fewer threads gets per thread (one thread streams more than its share of DRAM);
    // 0: not measured (profiles made before it, a device's rates).
    double gemv_thread_gbps = 0;
    // The decode rate on the matrices of a layer kNarrowCols wide (q, k, v, the output, gate, up,
    // down, one token each, layer after layer from DRAM), weight bytes per second beyond the
    // calls' costs (call_s); 0: not measured (a quick probe, profiles made before it).
    double gemv_narrow_gbps = 0;
    // The CPU's on one thread alone, as gemv_thread_gbps; 0: not measured (and a device's).
    double gemv_thread_narrow_gbps = 0;
    // A decode call of four rows, as rows8_gbps; 0: not measured (profiles made before it).
    double rows4_gbps = 0;
    // Calls of four and eight rows on a layer kNarrowCols wide, as gemv_narrow_gbps; 0: not
    // measured (a quick probe, profiles made before it).
    double rows4_narrow_gbps = 0, rows8_narrow_gbps = 0;
    // A device's decode call of sixteen rows (its Device::kRowWiseRows), wide and on the narrow
    // layer, as rows8_gbps; 0: not measured (the CPU, a quick probe's narrow one, profiles made
    // before it).
    double rows16_gbps = 0, rows16_narrow_gbps = 0;
    // The CPU giving back the weights it holds as the file lays them out (cpu::untile_weights
    // where it tiles them, a copy where not), for op offload's copies to a device, weight bytes
    // per second; 0: not measured (tiles that cannot be given back, a device's, profiles made
    // before it), op offload then reading them from the file again.
    double untile_gbps = 0;
    static constexpr double kRowsMeasured = 8;  // the most rows every rate measures
    // A decode call of `rows` rows (1 to max_rows) over one row's time for a model `width`
    // values wide, from the rates measured at 1, 4 and 8 rows (each between its narrow and wide
    // figure as gemv_at): linear between them (between 1 and 8 where 4 is not measured); a
    // device's calls of 9 to 16 rows (kDeviceRowWiseRows) linear from 8 to the time measured at
    // 16, or on along the last line where 16 rows were not measured. The
    // arithmetic of a few rows does not hide under the weights' read: on a 2-core VM the CPU's 4
    // tokens of Q4_1 took 1.3x one token's time on 4096-wide matrices and 1.6x on a 512-wide
    // layer, 8 tokens 2.7x and 3.3x. 0: not measured.
    double rows_time_scale(double rows, double width = 0, double max_rows = kRowsMeasured) const;
    // That cost for rows of `row_bytes`, in seconds.
    double call_s(double row_bytes) const { return (call_us * 1e3 + call_ns_per_row_byte * row_bytes) * 1e-9; }
    // The GEMM rate for a model `width` values wide: between the narrow and the wide rate on a
    // log scale, each beyond its end; gemm_gflops where the narrow one is not measured.
    double gemm_at(double width) const;
    // The decode rate for a model `width` values wide, between gemv_narrow_gbps and gemv_gbps as
    // gemm_at; gemv_gbps where the narrow one is not measured.
    double gemv_at(double width) const;
    // One thread's decode rate for a model `width` values wide, as gemv_at; 0: not measured.
    double gemv_thread_at(double width) const;
    bool operator==(const KernelRate&) const = default;
};

// The measured rate for `t`, or null when there is none (or it is not positive).
const KernelRate* rate_for(const std::vector<KernelRate>& rates, DType t);

// CPU attention as `strata probe` measured it (probe/cpu_costs), one thread's tile: `rows`
// query rows (the query heads sharing one KV head, times the tokens of a prefill tile) against
// `keys` cached positions of head_dim values take
//   tile_ns + keys x (kv_ns[type] x head_dim + rows x (row_ns x head_dim + score_ns))  ns:
// each K/V value converted once per tile, two dot products per row and value, a softmax term
// per row and key — or, when the cache is not in the CPU's caches, the K/V bytes at the rate one
// thread reads a KV head's slices (strided: every row holds all heads) from DRAM in place of the
// conversion if slower, the rows' products and the tile's fixed cost still added.
struct AttentionTileCost {
    struct KvNs {
        DType type = DType::F16;
        double ns = 0;
        bool operator==(const KvNs&) const = default;
    };
    std::vector<KvNs> kv_ns;
    double row_ns = 0;
    double score_ns = 0;
    double kv_gbps_per_thread = 0;  // 0: not measured
    double tile_ns = 0;             // a tile's fixed cost, whatever its keys

    // kv_ns for `t`, else the F16 figure (else the largest).
    double kv_ns_for(DType t) const;
    // One tile's seconds; `cold`: its K/V come from DRAM (kv_bytes_per_key of them per key).
    double tile_s(DType kv_type, double keys, double rows, double head_dim, bool cold = false,
                  double kv_bytes_per_key = 0) const;
    bool operator==(const AttentionTileCost&) const = default;
};

// A token's vector work in one CPU layer, one thread: its norms, RoPE, SwiGLU, residual adds
// and the matmuls' activation quantization — ns_per_token + ns_per_value x values(shape).
struct VectorCost {
    double ns_per_value = 0;
    double ns_per_token = 0;
    // Values one token's vector ops touch: two norms, RoPE on q and k and two adds (about 6
    // n_embd for q as wide as the embedding), SwiGLU, and the quantized inputs of the q/k/v,
    // output, gate/up and down matmuls.
    static double values(double n_embd, double n_q, double n_kv, double n_ff) {
        return 4 * n_embd + n_q + n_kv + n_ff + 2 * n_embd + n_q + n_ff;
    }
    bool operator==(const VectorCost&) const = default;
};

struct CpuProfile {
    std::string name;
    int n_cores = 1;
    int n_threads = 1;
    int n_numa = 1;
    uint64_t l1d_bytes = 0, l2_bytes = 0, l3_bytes = 0;
    // The last-level cache as a program here gets it (`strata probe` reads buffers of growing
    // size): on a VM far less than the host's L3 the topology reports; 0: not measured.
    uint64_t cache_bytes = 0;
    // The rate one thread reads a buffer again and again at, by its size (bytes, GB/s; the sizes
    // ascending), from which cache_bytes is read off; empty: not measured.
    std::vector<std::pair<double, double>> cache_curve;
    double gemm_gflops = 50;       // prefill matmul rate when `rates` has no entry for the type
    double gemv_gbps = 10;         // decode matmul weight-streaming rate, same fallback
    double attention_gbps = 10;    // KV bytes per second read by decode attention
    double attention_gflops = 20;  // attention arithmetic (scores, softmax, weighted sum)
    double layer_overhead_us = 15; // per layer and micro-batch: thread wake-up and sync
    // Measured by `strata probe` (absent or 0 in catalog profiles, which price attention from
    // attention_gbps/gflops and leave the vector ops out):
    std::optional<AttentionTileCost> attention_tile;
    VectorCost vector;     // 0s: not measured
    double loop_us = 0;    // one parallel loop's hand-off to the threads (then it replaces layer_overhead_us)
    std::vector<KernelRate> rates;

    // What a working set must exceed to come from DRAM: cache_bytes, else L3, else L2.
    uint64_t llc_bytes() const { return cache_bytes ? cache_bytes : l3_bytes ? l3_bytes : l2_bytes; }
    // How much faster than from DRAM a working set of `bytes` read over and over comes back: the
    // cache curve's rate at that size (interpolated on a log scale) over its rate at its largest
    // size; 1 without a curve. A decode step whose weights are not much larger than the cache
    // finds part of them still there from the step before.
    double reuse(double bytes) const;
    // `width`: the model's embedding width, for the decode rate on matrices of its size (0: the wide rate).
    double gemv_gbps_for(DType t, double width = 0) const;
    // `width`: the model's embedding width, for the rate on matrices of its size (0: the wide rate).
    double gemm_gflops_for(DType t, double width = 0) const;
    double pack_gbps_for(DType t) const;  // 0 where not measured
    double untile_gbps_for(DType t) const;  // 0 where not measured
    // A decode matmul call's cost beyond its bytes for rows of `cols` values of `t` (0 where not measured).
    double call_s_for(DType t, double cols) const;
    bool operator==(const CpuProfile&) const = default;
};

struct DramProfile {
    std::string kind;  // "DDR5-4800 x2", "measured"
    uint64_t capacity_bytes = 0;
    double read_gbps = 10;  // streaming read, all cores
    double copy_gbps = 10;  // memcpy, bytes copied
    bool operator==(const DramProfile&) const = default;
};

// Decode attention of one sequence on a device: a call over `keys` positions of the reference
// layer (DeviceOps), in microseconds.
struct AttentionPoint {
    double keys = 0, us = 0;
    bool operator==(const AttentionPoint&) const = default;
};

// A device's own ops as `strata probe` measured them through gpu::Device with Strata's kernels
// (probe/device_ops.cpp), the simulated device and a CUDA GPU alike: the cost model prices every
// device placement from these where a profile has them, and from a catalog GPU's peaks where not.
struct DeviceOps {
    int n_threads = 0;  // the simulated device's CPU threads; 0: a GPU
    // Matmuls per weight type, weights in device memory: gemv_gbps a call of one row
    // (gemv_narrow_gbps on a 512-wide layer's matrices), rows8_gbps of eight; a call of many rows takes weight bytes / pack_gbps + flops / gemm_gflops (the
    // arithmetic from n and 2n rows, n doubled from 512 (64 quick) until the time is nearly linear,
    // else the rate of the most rows; the pass from 64 rows over them all; gemm_narrow_gflops on a 512-wide layer's matrices); call_us +
    // call_ns_per_row_byte x a row's bytes is a call's cost beyond its bytes.
    std::vector<KernelRate> rates{};
    // Decode attention of one sequence on the reference layer (32 query heads, 8 KV heads of 128
    // values, an F16 cache) at a few depths, keys ascending.
    std::vector<AttentionPoint> attention{};
    static constexpr double kAttentionKvBytesPerKey = 2.0 * 8 * 128 * 2;  // its K and V, F16
    double op_overhead_us = 0;  // an op queued on a stream, beyond its work (its launch and hand-off)
    double graph_op_us = 0;     // an op of a captured graph as it runs, beyond its work; 0: not measured
    // Copies from and to page-locked host memory while the CPU streams DRAM (the simulated device:
    // its copies' own rate, unthrottled); 0: not measured.
    double h2d_gbps = 0, d2h_gbps = 0;
    double handoff_us = 0;  // a hop of a pass's data to the host and back, back to back (GpuProfile::handoff_us)
    // The same hop as a decode step makes it: the device's threads idle before it (a step starts
    // after the host sampled; a layer's KV or attention goes to the host after ms of other work)
    // and the host waiting for each copy; 0: not measured (profiles made before it).
    double round_trip_us = 0;
    // What the cost model prices a hop at: round_trip_us where measured, else handoff_us.
    double hop_us() const { return round_trip_us > 0 ? round_trip_us : handoff_us; }
    // Seconds of a decode attention call that reads `kv_bytes` of keys and values: the points
    // scaled by bytes, interpolated between them and extended beyond the last; 0 without points.
    double attention_s(double kv_bytes) const;
    bool operator==(const DeviceOps&) const = default;
};

struct GpuProfile {
    std::string name;
    uint64_t memory_bytes = 0;
    double mem_gbps = 100;      // device memory bandwidth
    double fp16_tflops = 10;    // dense FP16 GEMM rate
    double h2d_gbps = 10;       // pinned host → device over PCIe
    double d2h_gbps = 10;       // device → pinned host
    std::string pcie;           // "gen4 x16"
    double launch_overhead_us = 30;  // per layer and micro-batch: kernel launches and syncs
    int sim_threads = 0;  // the simulated device (gpu/sim_device): its threads, running the CPU's kernels; 0: a GPU
    // The cores its threads work as: sim_threads, or fewer where they and the host's threads are
    // more than the machine's (sim_effective_threads); 0: sim_threads.
    double sim_cores = 0;
    double sim_parallelism() const { return sim_cores > 0 ? sim_cores : sim_threads; }
    // One hop of a pass's data to the host and back (device work, the host's turn, device work
    // again), beyond the copies' bytes; 0: the CPU's layer_overhead_us stands for it.
    double handoff_us = 0;
    // Its ops as `strata probe` measured them (the simulated device's: HardwareProfile::sim);
    // absent: a catalog GPU, priced from the rates above.
    std::optional<DeviceOps> ops{};
    bool operator==(const GpuProfile&) const = default;
};

// The cores a simulated device's `sim_threads` work as beside `host_threads` on a machine of
// `machine_threads`: all of them where the host's leave them room, else the cores left (at least
// one), which more threads take turns on and do not make faster.
double sim_effective_threads(int sim_threads, int host_threads, int machine_threads);

struct DiskProfile {
    std::string name;
    std::string path;  // where the probe measured, if it did
    uint64_t capacity_bytes = 0;
    double read_gbps = 1;   // sequential O_DIRECT read at depth (32 reads of 1 MiB in flight)
    double write_gbps = 1;
    // The same read with fewer bytes in flight (bytes in flight, GB/s; ascending), as a ring of
    // a few layers keeps them; empty: not measured (a profile from before it), read_gbps at any depth.
    std::vector<std::pair<double, double>> read_depth_curve;
    // The curve as a reader sees it: a point below one with fewer bytes in flight (a noisy
    // measurement: a reader may always keep fewer in flight) at that one's rate.
    std::vector<std::pair<double, double>> rising_depth_curve() const;
    // GB/s with `inflight_bytes` in flight: interpolated on the rising curve, its ends beyond it.
    double read_gbps_at(double inflight_bytes) const;
    // The fewest bytes in flight at which the rising curve reaches `fraction` of its best rate;
    // 0 with no curve. A reader that keeps no more than that in flight finishes its reads in the
    // order it was given them at the disk's rate, instead of sharing the disk among all of them.
    double saturating_inflight_bytes(double fraction) const;
    // The model file's reads as a share of the probe's at the same depth: a virtual or shared
    // drive reads a file at the rate of where it lies, and the probe's file is one it has just
    // written (here 3.8 GB/s, the model file 3.2, an older file 2.3). Measured by the runtime on
    // the file it streams (runtime/place/model_file_rate.h); 1 in a saved profile.
    double model_file_scale = 1;
    // GB/s of the model file's reads with `inflight_bytes` in flight (0: the deepest rate).
    double model_file_gbps_at(double inflight_bytes) const {
        return (inflight_bytes > 0 ? read_gbps_at(inflight_bytes) : read_gbps) * model_file_scale;
    }
    bool operator==(const DiskProfile&) const = default;
};

struct HardwareProfile {
    std::string name;
    std::string source;  // "probe", "catalog", "file"
    CpuProfile cpu;
    DramProfile dram;
    std::optional<GpuProfile> gpu;
    std::optional<DeviceOps> sim;  // the simulated device, measured by `strata probe`; absent in catalog profiles
    DiskProfile nvme;
    std::vector<std::string> notes;  // how numbers were obtained, what was assumed
    // The probe that measured it (probe::kProbeVersion: its kernels and what it takes); 0 where
    // not recorded (a catalog profile, or one from before the field).
    int probe_version = 0;

    bool has_gpu() const { return gpu.has_value() && gpu->memory_bytes > 0; }
    // This machine as a pool of `threads` CPU threads sees it, fewer than it has (`-t`, or the
    // cores a simulated device's threads leave): each matmul rate its share of what all of them
    // measured; a decode matmul's instead `threads` times what one thread measured alone, up to
    // what all of them reach, where the probe measured one (a thread alone streams more than its
    // share: Q4_0 about 23 GB/s on one thread here, 25-30 on two); else at most `threads` times
    // what the simulated device measured per thread (its weights untiled: a floor). `threads` >=
    // n_threads: unchanged.
    HardwareProfile on_cpu_threads(int threads) const;
    // Throws UsageError naming the first rate or size that is not positive.
    void validate() const;
    // One line: "RTX 4090 24 GiB (PCIe gen4 x16, 25 GB/s) + DRAM 64 GiB (60 GB/s) + NVMe 7 GB/s".
    std::string summary() const;

    std::string to_json() const;
    // Throws UsageError on malformed JSON or a missing/invalid field, naming it.
    static HardwareProfile from_json(std::string_view text);
    bool operator==(const HardwareProfile&) const = default;
};

}  // namespace strata::planner
