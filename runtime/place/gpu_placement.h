#pragma once
// Whether a device runs the layers (--device: a CUDA GPU, or the simulated device that runs the
// same plans on the CPU), and the plan it runs by: the planner with the device in the hardware
// profile and --gpu-mem as its budget, every layer's matmuls on the device (its weights kept
// there, or copied in each pass from DRAM or NVMe), and the KV cache where --attention lets the
// planner put it.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "planner/hardware_profile.h"
#include "runtime/place/kv_placement.h"
#include "runtime/place/op_offload_choice.h"
#include "runtime/place/placement.h"

namespace strata::gpu { class Device; }
namespace strata::models { class GgufFile; struct Hparams; }

namespace strata::runtime {

enum class AttentionChoice { Auto, Cpu, Gpu };
// "auto", "cpu", "gpu"; nullopt for anything else.
std::optional<AttentionChoice> parse_attention(std::string_view s);

// Auto: a CUDA GPU when one is usable, else the CPU.
enum class DeviceKind { Auto, Cpu, Sim, Cuda };
// "auto", "cpu", "sim", "cuda"; nullopt for anything else.
std::optional<DeviceKind> parse_device(std::string_view s);

struct GpuRequest {
    DeviceKind device = DeviceKind::Auto;  // --device
    std::optional<uint64_t> gpu_mem;  // --gpu-mem: nullopt = the planner's default for the device; 0 = CPU only
    AttentionChoice attention = AttentionChoice::Auto;
    double sim_link_gbps = 8;  // --sim-link: the simulated device's host <-> device rate, each way
    int sim_threads = 0;       // --sim-threads: CPU threads of the simulated device; 0: half the cores
    OpOffloadMode op_offload;  // --op-offload: a prompt's passes computing the plan's CPU layers on the device
    // --sim-shrink-after PASSES:BYTES (gpu::SimOptions::shrink_after, shrink_bytes); -1: never.
    int64_t sim_shrink_after = -1;
    uint64_t sim_shrink_bytes = 0;
};

struct GpuTarget {
    bool use = false;
    DeviceKind kind = DeviceKind::Cpu;  // Sim or Cuda when used
    std::string why_not;          // when not used: one line for the log
    planner::HardwareProfile hw;  // this machine with the device; its memory is the budget
    uint64_t gpu_mem = 0;
    // Named by --device (sim, cuda): used even where the CPU alone is predicted faster. Else
    // (auto) only where the device's plan beats the CPU alone's (runtime/place/run_layout.h).
    bool chosen = false;
};
// The device and its budget, or why the engine runs on the CPU: --device cpu, --gpu-mem 0, no
// CUDA in this build, no device or driver, a weight or KV type the kernels lack (UsageError
// instead where --device cuda named the GPU). Every
// architecture runs on a device (the layer program: runtime/exec/layer_program.h); a mixture of
// experts there keeps its experts on the host unless the plan holds some on the device.
// The host computes on `host_threads` (0: every core, or with the simulated device the cores its
// threads leave), which the target's profile prices.
GpuTarget find_gpu(const GpuRequest& req, const models::GgufFile& file, const models::Hparams& hp, DType kv_type,
                   int host_threads = 0);
// The device a target names, with its memory (throws BackendError when it cannot be opened).
std::unique_ptr<gpu::Device> open_device(const GpuTarget& target, const GpuRequest& req, bool int8_activations);

// The KV placement a plan implies: every layer's KV on the GPU, else on the host with
// attention where the plan runs it.
KvPlacement kv_placement_of(const planner::Plan& plan);

struct GpuPlacement {
    Placement placement;
    KvPlacement kv = KvPlacement::Device;
};
// `device_bytes`: what the budget leaves for layers and KV once the backend's working set is
// taken. Throws OutOfBudget when nothing fits, UsageError for a given plan it cannot run.
// `op_offload`: the run may compute its CPU layers on the device in a prompt's passes (the plan
// prices their prefill so: planner::RuntimeLimits::op_offload).
GpuPlacement place_on_gpu(const models::GgufFile& file, const ResidencyInput& in, const PlacementOptions& opts, const GpuTarget& gpu,
                          uint64_t device_bytes, DType kv_type, AttentionChoice attention, bool op_offload);

// The simulated device's CPU threads: --sim-threads, else half the cores.
int sim_thread_count(const GpuRequest& req);
// The host's threads: `n_threads` when given, else every core, or with the simulated device the
// cores its own threads leave (the host's waiting threads would otherwise take turns with the
// device's). 0: every core.
int host_thread_count(const GpuRequest& req, int n_threads);

}  // namespace strata::runtime
