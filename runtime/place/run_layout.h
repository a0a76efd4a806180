#pragma once
// What one run holds where, decided before any weight is read: the KV cache (its size, the
// layers that spill to disk, whether it lives on the device) and the placement of the weights
// (the planner's, or a given plan), on the CPU alone or beside a device (CUDA or simulated).
// The engine builds its weight store and backend from this and nothing else.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include "core/dtype.h"
#include "runtime/kv/kv_cache.h"
#include "runtime/place/gpu_placement.h"
#include "runtime/place/kv_placement.h"
#include "runtime/place/placement.h"

namespace strata::models { class GgufFile; struct Hparams; }
namespace strata::storage { class MemoryBudget; }

namespace strata::runtime {

// The KV cache's size as the engine holds it.
struct KvSize {
    int32_t n_blocks = 0;
    uint64_t layer_bytes = 0;   // one layer's keys and values (as spilled: blocks padded for O_DIRECT)
    uint64_t resident_layer_bytes = 0;  // the same held in DRAM
    uint64_t hidden_layer_bytes = 0;    // a rebuilt layer's saved hidden states in DRAM
    uint64_t all_bytes = 0;     // every layer's; rebuilt layers keep hidden states and share one K/V layer
    std::vector<bool> rebuilt;  // per layer, from a given plan (empty: none)
    int n_rebuilt = 0;
};
// kv_positions 0: one sequence of n_ctx positions; `given`: a plan whose recomputed layers keep hidden states.
KvSize kv_size(const models::Hparams& hp, int kv_positions, int n_ctx, DType kv_type, const planner::Plan* given);

// The least DRAM a given plan runs in (`gpu`: a plan with a device): its weights as it holds
// them (resident layers, the ring) beside `in`'s other bytes with every KV layer spilled to disk
// (its ring and staging), or with the whole KV cache kept where that is less (a small cache).
// A device plan whose KV cache the device holds (unless `attention` asks for the CPU) keeps on
// the host, unspilled, the KV of the layers it leaves to the CPU only (as layout_with_gpu counts it).
uint64_t given_plan_least_dram(const ResidencyInput& in, const KvSize& kv, const planner::Plan& plan, bool gpu = false,
                               AttentionChoice attention = AttentionChoice::Auto);

// What the layout needs beside the plan's inputs.
struct LayoutOptions {
    DType kv_type = DType::F16;
    int prefetch_depth = 2;
    std::filesystem::path kv_spill_dir;  // empty: the cache folder
    std::optional<uint64_t> prefix_spill_bytes;  // nullopt: four times the KV cache
    AttentionChoice attention = AttentionChoice::Auto;
    OpOffloadMode op_offload;  // a device plan's CPU layers in a prompt's passes
    int32_t max_pass_rows = 256;  // the rows of the runtime's largest pass (Backend::kMaxUbatch)
};

// Device memory and pinned DRAM the device backend takes besides the layers and KV cache it
// holds, as the backend sizes them (DeviceBackend::footprint).
struct DeviceFootprint {
    uint64_t working_streamed = 0;  // activations, scratch, the head and two buffers of the largest layer
    uint64_t working_resident = 0;  // the same with no layer buffers (a mixture of experts)
    uint64_t staging = 0;           // pinned host staging (DRAM)
    // The pinned buffer (DRAM) a dense model's layers held on the device are read through while
    // the run loads, beside everything else the run holds.
    uint64_t load_buffer = 0;
    uint64_t attention_weights = 0;  // every layer's tensors but its experts (a mixture of experts)
    // Routed experts the device may hold: whether its kernels run them, the largest expert's
    // bytes, the pinned staging (DRAM) and device scratch of computing them there.
    bool experts_fit = false;
    uint64_t expert_bytes = 0, expert_staging = 0, expert_scratch = 0;
};

// The least DRAM a given plan with a device (a dense model's) runs in, as layout_with_gpu counts
// it: given_plan_least_dram beside the device backend's host buffers.
uint64_t given_device_plan_least_dram(const ResidencyInput& in, const DeviceFootprint& device, const KvSize& kv,
                                      const planner::Plan& plan);

struct RunLayout {
    std::unique_ptr<KvCache> kv;
    std::unique_ptr<Placement> placement;
    KvPlacement kv_on = KvPlacement::HostCpuAttention;  // for the layers a device computes
    // The plan made beside the device is predicted no faster than the CPU alone's, or the device
    // cannot hold the run: the caller lays the run out again without the device
    // (device_prediction: what the device's best plan said, where there was one, before any
    // search made again to decode no slower).
    bool cpu_alone_wins = false;
    std::optional<planner::Prediction> device_prediction;
};


// The layout on the CPU alone (`device` null) or beside the device `gpu` names; a plan the
// planner makes beside a device --device did not name (not a given one) only where it beats
// the CPU alone (else cpu_alone_wins), a dense model's searched again to decode no slower where
// the best decoded slower for a sooner workload (Placement::unbounded). `in`: the
// layers as the weight store reads them, the KV cache and activations among other_bytes.
// Throws OutOfBudget (what DRAM or the device cannot hold) and UsageError (a given plan or
// --override-tensor this run cannot honour).
RunLayout lay_out(const models::GgufFile& file, const models::Hparams& hp, const ResidencyInput& in,
                  const PlacementOptions& po, const LayoutOptions& lo, const KvSize& kv, storage::MemoryBudget& dram,
                  const GpuTarget& gpu, const DeviceFootprint* device);

// DRAM the run holds besides the weights: the KV cache the host keeps and the host's activations
// (beside a device, those of the layers the CPU computes there).
uint64_t host_working_bytes(const RunLayout& layout, bool on_device, uint64_t activations);

}  // namespace strata::runtime
