#pragma once
// The cost model: for one policy (batch shape, attention device, recompute, KV type), the
// seconds each placement choice of a layer adds to each stream — GPU, CPU, PCIe H2D/D2H,
// NVMe, DRAM — in prefill and in one decode step, and the bytes it occupies on each tier.
// Every cost is linear in the share of layers taking the choice, which is what lets the LP
// (lp_placement) and the evaluation of a rounded plan use the very same numbers.
//
// A phase's time is that of a pipeline whose streams overlap: the busiest I/O stream, or
// the compute chain — GPU and CPU work overlap across micro-batches, so with m micro-batches
// compute takes gpu + cpu/m or cpu + gpu/m, whichever is longer; and the CPU's attention for
// the device's layers overlaps the device's matmuls within a step (NEO's asymmetric pipeline
// over two sub-batches, layer by layer: max(gpu, attention) and half a layer of each to fill
// and drain) — plus what cannot overlap (kernel launches and CPU/GPU hand-offs per layer).
#include <algorithm>
#include <array>
#include <optional>

#include "planner/hardware_profile.h"
#include "planner/model_shape.h"
#include "planner/plan.h"
#include "planner/workload.h"

namespace strata::planner {

enum class Phase { Prefill, Decode };

// Linear cost of one choice (at share 1) or a sum of them.
struct Cost {
    std::array<double, kNumStreams> prefill{}, decode{};  // seconds per pass / per decode step
    double prefill_overhead = 0, decode_overhead = 0;     // seconds that do not overlap
    // Of decode[Cpu]: the CPU's attention for layers the device computes, which the device
    // runtime runs beside the device's matmuls, the batch cut in two sub-batches (NEO).
    double decode_overlapped = 0;
    std::array<double, 3> bytes{};                        // resident bytes on Gpu, Dram, Nvme
    double gpu_staging = 0;   // GPU bytes needed to stream this layer in (double-buffered)
    double dram_staging = 0;  // DRAM bytes needed to stage it from NVMe

    Cost& operator+=(const Cost& o);
    Cost scaled(double f) const;
};

// What the runtime that will run a plan cannot do, so the planner never chooses it.
struct RuntimeLimits {
    // The output layer, the embedding table and KV stay off NVMe (the CPU runtime streams only
    // layers' weights).
    bool layers_only_on_nvme = false;
    // The output layer and the embedding table stay off NVMe (KV may spill there): what the CPU
    // runtime runs (`strata plan` for this machine's model file).
    bool head_off_nvme = false;
    // Every layer's matmuls on the GPU; the embedding table may still be looked up on the host.
    bool gpu_layers_only = false;
    // KV is recomputed only from hidden states kept on the GPU (the device runtime's KVPR).
    bool recompute_on_gpu_only = false;
    // Buffers of the rings streamed layers and spilled KV layers come through
    // (planner/ring_pipeline.h) on a CPU-only plan; 0: as many as the pipeline needs.
    int stream_slots = 0;
    // The most bytes of a ring's reads the reader keeps in flight (its queue depth x its chunk);
    // a streamed layer's read is priced at the disk's rate with that many or its slots' bytes in
    // flight, the fewer (DiskProfile::read_gbps_at); 0: at the disk's deep rate (read_gbps).
    double stream_inflight_bytes = 0;
    // Bytes in flight while a ring of `layer_bytes` layers is read; 0: no ring to price.
    double ring_inflight_bytes(double layer_bytes) const {
        return stream_slots > 0 ? std::min(stream_inflight_bytes, stream_slots * layer_bytes) : 0;
    }
    // Bytes a spilled KV layer moves on the disk per byte of its entries (its blocks padded to
    // the disk's alignment).
    double kv_spill_bytes_factor = 1;
    // The most bytes the spilled KV cache's reader keeps in flight: its ring's reads are priced
    // as a streamed layer's, at the rate with that many or its slots' bytes in flight, the
    // fewer; 0: at the disk's deep rate.
    double kv_spill_inflight_bytes = 0;
    double kv_ring_inflight_bytes(double layer_bytes) const {
        return stream_slots > 0 ? std::min(kv_spill_inflight_bytes, stream_slots * layer_bytes) : 0;
    }
    // The device runtime's ring of slots for layers copied in: a device plan's decode step is
    // then priced as the runtime issues it (CostModel::device_step_s); 0: its streams overlap
    // freely, as the LP assumes.
    int device_slots = 0;
    // The runtime holds the output head, the embeddings, the KV cache, the hidden states and a
    // ring for layers read from NVMe in DRAM whatever the plan, and plans with a DRAM budget net
    // of them (the device runtime): the plan's DRAM then counts only the layers it keeps there.
    // Its device's working set, apart from the GPU budget too, holds a pass's hidden states and
    // the one layer of keys and values it stages (or recomputes) with the KV cache in DRAM.
    bool dram_held_apart = false;
    // A prompt pass computes a device plan's CPU layers on the device where that is quicker, the
    // weights rebuilt from DRAM (or read from the model file) and copied in (planner/op_offload.h,
    // the device runtime's op offload): their prefill is priced so, so that the LP does not keep layers off the CPU
    // for a prefill the CPU would not run.
    bool op_offload = false;
    // The output head is held on the device and computed there whatever else the plan places
    // (the device runtime); with dram_held_apart its bytes are in the device's working set, apart
    // from the GPU budget.
    bool head_on_device = false;
    // Token embeddings are looked up by the host in DRAM and their rows uploaded (the device
    // runtime): the table is never on the device.
    bool embedding_on_host = false;
};

class CostModel {
public:
    // `shape.kv_type` is ignored: the policy's KV type is used.
    CostModel(const ModelShape& shape, const HardwareProfile& hw, const Workload& wl, const Policy& policy,
              const RuntimeLimits& limits = {});

    const Policy& policy() const { return policy_; }
    const ModelShape& shape() const { return shape_; }
    bool has_gpu() const { return has_gpu_; }

    bool allowed(WeightOption o) const;
    bool allowed(KvOption o) const;
    bool allowed(HiddenOption o) const { return has_gpu_ || o == HiddenOption::Dram; }
    // For the output layer and the embedding table.
    bool allowed_head(WeightOption o) const {
        return (has_gpu_ || device_of(o) == Device::Cpu) &&
               !((limits_.layers_only_on_nvme || limits_.head_off_nvme) && tier_of(o) == Tier::Nvme);
    }
    // The output layer's options: the head's, only the device where the runtime holds it there.
    bool allowed_output(WeightOption o) const {
        return allowed_head(o) && !(has_gpu_ && limits_.head_on_device && o != WeightOption::Gpu);
    }
    // The embedding table's: the head's, only DRAM where the runtime looks rows up there.
    bool allowed_embedding(WeightOption o) const {
        return allowed_head(o) && !(has_gpu_ && limits_.embedding_on_host && o != WeightOption::DramCpu);
    }
    Device attention_device(KvOption o) const;

    Cost layer_weights(int layer, WeightOption o) const;
    // `n` layers' weights at `o` from `layer` on, one after another: n times layer_weights, but
    // a run of CPU layers beside the device hops once (total_cost's drop_hop). The LP's column
    // for a group: its share of the group's hops, a bound that is exact for the whole group.
    Cost run_weights(int layer, int n, WeightOption o) const;
    // A CPU layer (`cpu_option` DramCpu or NvmeCpu) computed on the device in a prompt's pass (op
    // offload): one held in DRAM rebuilt there as the file lays it out (its tiles given back on
    // the CPU's threads) and copied in as it is rebuilt; one streamed from the file copied in as read.
    Cost op_offloaded(int layer, WeightOption cpu_option) const;
    // Seconds of that copy alone, before anything of the layer runs (a mixture of experts' layer,
    // whose host waits for it): the link's, or the rebuild's or the file's read where slower,
    // and the simulated device's own copy.
    double op_offload_copy_s(int layer, WeightOption cpu_option) const;
    // A layer whose routed experts are offloaded (expert_cost.cpp): the rest resident, the
    // experts read through the DRAM cache at its expected hit rate.
    Cost offloaded_layer(int layer, const ExpertPlan& experts) const;
    // A mixture-of-experts layer whose attention runs on the GPU and whose feed-forward (router,
    // shared and routed experts: resident, or `offloaded` behind the DRAM cache) runs on the CPU.
    Cost hybrid_layer(int layer, const ExpertPlan& experts, bool offloaded) const;
    // The device's share of hybrid_layer: the experts `experts` holds there, their reads and
    // compute, their rows' hops and launches, none of it overlapped with the host's.
    Cost device_experts(int layer, const ExpertPlan& experts) const;
    // The times the device experts' scratch (every choice of a pass of ModelShape::kPassRows
    // rows, up to kDeviceExpertRows: core/kernel_shapes.h) fills in a pass giving them
    // `device_rows` rows (the host waits for each fill before the next).
    double scratch_fills(double device_rows) const;
    // A layer's weights as the plan places them: hybrid_layer, offloaded_layer or layer_weights.
    Cost placed_weights(const Plan& plan, const LayerPlacement& l) const;
    Cost layer_kv(int layer, KvOption o) const;
    // A layer's KV beside its matmuls on `weights`: a layer computed on the CPU beside a device
    // runs whole there, attending on the CPU to its K and V in DRAM whatever tier holds them
    // (the device runtime's layer_on_cpu), its hidden state's hop the weights'; else layer_kv.
    // The LP prices each (weights, KV) pair so.
    Cost layer_kv_beside(int layer, KvOption o, Device weights) const;
    // A layer as placed, weights and KV, as the runtime runs it (a CPU layer beside a device
    // attends on the CPU to its KV in DRAM).
    Cost placed_layer(const Plan& plan, const LayerPlacement& l) const;
    Cost output(WeightOption o) const;     // the logits matmul
    Cost embedding(WeightOption o) const;  // lookup only: Gpu, DramCpu or NvmeCpu
    Cost hidden(HiddenOption o) const;     // for all layers together
    // What does not depend on placement: prefill attention, logits copies, the GPU working set.
    Cost fixed() const;

    // Pipelined phase time from summed costs: the busiest I/O stream, or the longest of the
    // compute chains (each linear in the costs, so that the LP bounds the time by each).
    PhaseTimes phase_time(Phase ph, const Cost& total) const;
    // GPU work then the CPU's of the last micro-batch, the CPU's then the GPU's, and (a third,
    // where its attention overlaps the device's matmuls) the CPU's work alone; each with what
    // cannot overlap.
    int compute_chains(Phase ph) const { return ph == Phase::Decode && attention_overlaps() ? 3 : 2; }
    double compute_chain(Phase ph, const Cost& c, int chain) const;
    // What a decode step saves as one captured graph where every layer's weights and KV are on
    // the device (0 where this policy's step cannot be captured): each chain's saving, for
    // such a plan only (graph_saving_s), which the LP relaxes to the least device share of any
    // layer group's weights and KV.
    double graph_saving_whole_s() const;
    // Whether a decode step's CPU attention overlaps the device's matmuls: CPU attention beside
    // a device, a micro-batch of two sequences or more (one sequence is not split).
    bool attention_overlaps() const { return has_gpu_ && policy_.cpu_attention && mb_ >= 2; }
    // Prefill + (gen_len - 1) decode steps, per generated token as the objective counts it.
    double objective_scale() const;  // divide total seconds by this
    int32_t n_decode_steps() const { return wl_.gen_len - 1; }

    // Sums the costs of an integral plan and predicts it (memory with staging maxima).
    Prediction predict(const Plan& plan) const;
    Cost total_cost(const Plan& plan) const;
    MemoryUse memory(const Cost& total) const;

private:
    // Weights of `stored` bytes, of which a micro-batch reads decode_read (prefill_read) bytes
    // and each token multiplies `params` parameters (experts: the share they choose).
    struct WeightsRead {
        double stored, decode_read, prefill_read, params;
    };
    WeightsRead layer_read(int layer) const;  // a whole layer's, as the workload reads it
    // KV stored at `o`'s tier, attended on `attention`; `q_crosses`: the layer's queries, new
    // entries and prompt cross the link (a device layer's KV on the host, or the reverse).
    Cost kv_cost(KvOption o, Device attention, bool q_crosses) const;
    Cost weights_cost(const WeightsRead& w, double tokens_decode, double tokens_prefill, WeightOption o, bool is_layer) const;
    // A device matmul of `tokens` rows over `bytes` of weights; decode rows go kGpuDecodeRows to a
    // call. Measured (DeviceOps): a decode call on the line through its one-, four-, eight- and
    // sixteen-row times by its rows, a call of many rows its pass over the weights plus its
    // arithmetic. A catalog GPU reads them once a call, overlapping the arithmetic.
    double gpu_matmul_s(double tokens, double bytes, double flops_per_token, bool decode) const;
    // A layer's device launches beyond its work in decode or prefill, from the measured call costs
    // and `op_us` per other op.
    double device_layer_launch_s(double op_us, bool decode) const;
    // What a decode step of `plan` saves when it runs as one captured graph (each op then costs
    // DeviceOps::graph_op_us instead of op_overhead_us); 0 where it cannot.
    double graph_saving_s(const Plan& plan) const;
    // A decode step of a device plan as the device backend issues it (device_pipeline.h): its
    // copies through the ring of slots and the link's one queue, the host's waits; 0 where the
    // runtime runs the step otherwise (the CPU's attention overlapping the device's matmuls,
    // micro-batches, a mixture of experts), there is no device, or limits.device_slots is 0.
    double device_step_s(const Plan& plan) const;
    // A layer whose matmuls run on the CPU beside the device, its hidden states hopping around it
    // (with CPU attention, layer_kv prices the hops).
    bool on_cpu_beside_device(const LayerPlacement& l) const;
    // Takes one such layer's hop out of `total`: it follows another CPU layer (its prompt pass's
    // hop too where both prefill on the CPU: `prefill`).
    void drop_hop(Cost& total, bool prefill) const;
    // The device's measured ops, or null (a catalog GPU, or none).
    const DeviceOps* ops() const { return has_gpu_ && hw_.gpu->ops ? &*hw_.gpu->ops : nullptr; }
    // A CPU-only plan's phase through the ring of limits_.stream_slots buffers, layer by layer.
    double ring_bound_s(const Plan& plan, Phase ph) const;
    // The CPU time the simulated device's memcpy of `bytes` takes from its ops or the host's; 0 on
    // a GPU, or where a core is left for it.
    double sim_copy_s(double bytes) const;
    // A CPU layer's work besides matmuls and attention for a pass of `tokens` tokens (one
    // micro-batch): its vector ops on `threads` threads (compute stream), and its parallel
    // loops' hand-offs (overhead).
    double cpu_vector_s(double tokens, double threads) const;
    double cpu_loops_s(double tokens) const;
    // Decode attention of one layer for `seqs` sequences (the workload's decode rows each) on the
    // CPU's kernels at the average context, on `threads` threads (the host's, or the simulated
    // device's), from DRAM at most at DRAM's rate.
    double cpu_decode_attention_s(double threads, double seqs) const;
    // Causal prefill attention of all layers and sequences on the CPU's kernels.
    double cpu_prefill_attention_s(double threads) const;
    // `c` without the DRAM that limits_.dram_held_apart leaves to the runtime: all of it but a
    // layer's weights (`layer_weights`), their staging too.
    Cost held_apart(Cost c, bool layer_weights) const;
    // Whether the device is the simulated one and the probe measured the kernels it runs.
    bool sim_attention() const { return has_gpu_ && hw_.gpu->sim_threads > 0 && hw_.cpu.attention_tile.has_value(); }

    const ModelShape& shape_;
    HardwareProfile hw_;
    Workload wl_;
    Policy policy_;
    bool has_gpu_;
    RuntimeLimits limits_;
    // Rates in bytes/s and flops/s.
    double gpu_bw_ = 0, gpu_flops_ = 0, h2d_ = 0, d2h_ = 0;
    double cpu_gemv_ = 0, cpu_gemm_ = 0, cpu_attn_bw_ = 0, cpu_attn_flops_ = 0;
    double dram_bw_ = 0, nvme_r_ = 0, nvme_w_ = 0;
    double file_r_ = 0;  // the model file's reads (streamed weights, experts missed), at the deepest rate
    double gpu_launch_s_ = 0, gpu_prefill_launch_s_ = 0, cpu_sync_s_ = 0;
    double hop_s_ = 0;  // a pass's data to the host and back (GpuProfile::handoff_us); 0: not measured
    double threads_ = 1;
    double cpu_weight_pass_ = 0;  // bytes/s of a many-token matmul's pass over its weights
    double cpu_untile_ = 0;       // bytes/s of the CPU giving back its tiles as the file's layout; 0: it cannot
    std::optional<KernelRate> dev_rate_;  // the measured device's matmuls of the weight type
    std::optional<KernelRate> cpu_rate_;  // the probed CPU's of the weight type
    double dev_weight_pass_ = 0;  // bytes/s of its many-row call's pass over the weights
    bool pack_measured_ = false;
    double cpu_call_s_ = 0;         // a decode matmul call's cost beyond its bytes (rows of the embedding's width)
    double cpu_layer_calls_s_ = 0;  // a layer's four decode matmul calls' (q/k/v, output, gate/up, down)
    // Workload in tokens: B_ sequences, rows_d_ rows in a decode step (B_ times each sequence's
    // rows: more than one where a speculative pass verifies a draft).
    double B_ = 1, m_ = 1, mb_ = 1, P_ = 1, ctx_avg_ = 1, ctx_max_ = 1, rows_d_ = 1;
    // A prompt's passes (each micro-batch's in passes of up to ModelShape::kPassRows rows, as
    // the runtime runs them), and their rows: each pass reads, copies or streams the weights
    // it uses again.
    double passes_ = 1, pass_rows_ = 1;
    double kvb_ = 0;  // KV bytes per token per layer in the policy's type
};

}  // namespace strata::planner
