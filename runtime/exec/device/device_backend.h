#pragma once
// The llama forward pass on a device (gpu/device.h: CUDA, or the simulated device), behind the
// same Backend interface as the CPU. Weights: the layers the plan keeps on the device are read
// there once at load; the others come in each pass from host memory (resident in DRAM, or
// streamed from NVMe by the weight store) into a ring of device slots, in the order
// layer_schedule gives, so their copies overlap compute. The output head and norms live on the
// device; embeddings are looked up on the host. The KV cache is in one of three places
// (runtime/place/kv_placement.h). Layers the plan runs on the CPU get the pass's hidden states
// down and send them back up; their KV cache is the host's. A pass long enough for op offload
// (DeviceBackendOptions::op_offload_rows) copies those layers in too and computes them on the
// device, their K/V still stored and attended to in DRAM. Three streams (compute, H2D, D2H) with an event for every
// dependency; the host waits only for data it needs (logits, q/k/v for CPU attention, a
// streamed layer's copy before its host buffer is handed back). A mixture of experts keeps
// every layer's attention on the device and runs its feed-forward on the host. The implementation:
// device_impl.h and the device_*.cpp beside it.
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "runtime/exec/backend.h"
#include "runtime/place/kv_placement.h"
#include "runtime/place/run_layout.h"

namespace strata::gpu { class Device; }
namespace strata::storage { class MemoryBudget; }

namespace strata::runtime {

class WeightStore;
struct ModelWeights;

struct DeviceBackendOptions {
    KvPlacement kv = KvPlacement::Device;  // for the layers the device computes
    int n_slots = kDeviceSlots;  // device buffers for the layers streamed in each pass
    bool int8_activations = false;  // the CPU layers' matmuls (CpuBackend::set_int8_activations)
    // A mixture of experts: per layer, the routed experts held in device memory and computed
    // there (runtime/exec/device/device_experts.h); the host computes the others.
    std::vector<std::vector<int32_t>> experts;
    // Decode steps held wholly on the device run as one captured graph (Device::capture).
    bool graphs = true;
    // Op offload: a pass holding a prompt run (a segment of more than kDecodeRows tokens) of at
    // least this many rows copies the plan's CPU layers into the device's slots and computes them
    // there, attending on the CPU to their KV in DRAM; 0: the CPU layers always run on the CPU.
    int64_t op_offload_rows = 0;
};

class DeviceBackend : public Backend {
public:
    // Runs on `device` (its memory is the --gpu-mem budget). The weight store's residency says
    // which layers are on the device (read once here). Staging buffers in pinned host memory are
    // charged to `dram`. Throws BackendError (a weight or KV type the device cannot read) and
    // OutOfBudget (what the device's memory cannot hold).
    DeviceBackend(std::unique_ptr<gpu::Device> device, const models::Hparams& hp, WeightStore& weights, const KvCache& kv,
                  storage::MemoryBudget& dram, const DeviceBackendOptions& opts);
    ~DeviceBackend() override;
    std::string_view name() const override;  // the device's: "cuda:0", "sim"
    // Passes run as one captured graph so far (DeviceBackendOptions::graphs).
    uint64_t graph_launches() const;
    // Whether a prompt's long passes copy layers in (op offload), as asked and set up.
    bool op_offloads() const;
    // The device's streams, and on the host the CPU's attention for the device's layers.
    void set_trace(Trace* trace) override;

    // What the backend takes on `device` and in pinned DRAM besides the layers and KV cache it
    // holds, for a context of n_ctx (runtime/place/run_layout.h lays the run out by it).
    static DeviceFootprint footprint(const gpu::Device& device, const models::Hparams& hp, const ModelWeights& w, int n_ctx,
                                     uint64_t largest_layer_bytes);
    // The part of it in DRAM (staging, load buffer), which needs no device: `strata plan` counts
    // it for a device it only prices.
    static DeviceFootprint host_footprint(const models::Hparams& hp, int n_ctx, uint64_t largest_layer_bytes);
    // The routing of a mixture of experts, which the host's feed-forward counts.
    const RoutingStats* routing_stats() const override;
    DeviceMemory device_memory() const override;
    std::vector<std::vector<int32_t>> device_experts() const override;
    // Before the engine goes on without the device: each layer's KV cache (or saved hidden
    // states) still on the device copied into the host's, which holds every layer from then on.
    void hand_kv_to_host(KvCache& kv);
    // Draft trees' rows attend through their masks (gpu::DecodeAttentionArgs::tree_mask) wherever
    // the KV cache is: on the device, copied in from DRAM, or attended to by the host CPU. The
    // kept path's rows move in the device's cache, on the device (Device::kv_move).
    void keep_path(const KvCache& kv, SeqId seq, std::span<const int64_t> slots) override;
    // The device's cache copies its blocks on the device, as KvCache::unshare copied the host's.
    void copy_blocks(std::span<const KvCache::BlockCopy> copies) override;

private:
    void reserve(int64_t n_tokens) override;
    void compute(const PassLayout& pass, KvCache& kv) override;
    // Every row as its sequence alone would compute it, kHeadRows at a time (n_long unused).
    void head(std::span<const int64_t> rows, float* logits, int64_t n_long) override;
    void hidden(std::span<const int64_t> rows, float* out) override;
    // Copies `rows` of the pass's hidden states into xn (from row 0) and applies the output norm.
    void norm_rows(std::span<const int64_t> rows);
    // The normed final hidden states of `rows` into `out`, or their logits when `project`.
    void final_rows(std::span<const int64_t> rows, bool project, float* out);

    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace strata::runtime
