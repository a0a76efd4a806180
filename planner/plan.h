#pragma once
// A placement plan: where every layer's weights and KV live, which device runs its matmuls
// and attention, the batch shape, and what the planner predicts. It is data: it round-trips
// through JSON so a plan can be kept, diffed, replayed (`strata generate --plan FILE`) and
// compared with what the runtime measured.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "planner/expert_plan.h"
#include "planner/workload.h"

namespace strata::planner {

struct ModelShape;

enum class Tier { Gpu, Dram, Nvme };
enum class Device { Gpu, Cpu };

// Where a layer's weights live and which device runs its matmuls in decode. Weights off the
// GPU are either streamed to it each pass (…ToGpu) or used in place by the CPU (…Cpu).
// Prefill runs every matmul on the GPU when there is one (its cost is amortised over the prompt).
enum class WeightOption { Gpu, DramToGpu, DramCpu, NvmeToGpu, NvmeCpu };
inline constexpr int kNumWeightOptions = 5;
// Where a layer's KV cache lives, and in which form: K/V themselves, or the layer's input
// hidden states from which K/V are recomputed each step (KVPR/HCache).
enum class KvOption { Gpu, Dram, Nvme, ActGpu, ActDram, ActNvme };
inline constexpr int kNumKvOptions = 6;
// Where the hidden states of the whole block wait between layers (FlexGen's "activations").
enum class HiddenOption { Gpu, Dram };
inline constexpr int kNumHiddenOptions = 2;

Tier tier_of(WeightOption o);
Device device_of(WeightOption o);
Tier tier_of(KvOption o);
bool is_recompute(KvOption o);
std::string_view tier_name(Tier t);
std::string_view device_name(Device d);
std::string_view option_name(WeightOption o);  // "gpu", "dram->gpu", "dram(cpu)", ...
std::string_view option_name(KvOption o);      // "gpu", "dram", "act:dram", ...

// The outer-search choices that the LP does not make.
struct Policy {
    int32_t batch = 1;      // sequences in one pass (FlexGen's block size)
    int32_t n_micro = 1;    // micro-batches per pass; batch / n_micro sequences each
    bool cpu_attention = false;  // attention over DRAM/NVMe-resident KV runs on the CPU
    bool recompute = false;      // the LP may store hidden states instead of KV
    DType kv_type = DType::F16;
    bool operator==(const Policy&) const = default;
};

struct LayerPlacement {
    int32_t layer = 0;
    WeightOption weights = WeightOption::Gpu;
    KvOption kv = KvOption::Gpu;
    Device attention = Device::Gpu;
    bool operator==(const LayerPlacement&) const = default;
};

enum class Stream { GpuCompute, CpuCompute, PcieH2D, PcieD2H, Nvme, Dram };
inline constexpr int kNumStreams = 6;
std::string_view stream_name(Stream s);

struct PhaseTimes {
    double time_s = 0;                        // pipelined time of the phase (one pass)
    std::array<double, kNumStreams> stream_s{};  // busy time of each stream
    double overhead_s = 0;                    // what cannot overlap (launches, syncs)
    Stream bottleneck = Stream::GpuCompute;
    bool operator==(const PhaseTimes&) const = default;
};

struct MemoryUse {
    double gpu = 0, dram = 0, nvme = 0;  // bytes
    bool operator==(const MemoryUse&) const = default;
};

struct Prediction {
    PhaseTimes prefill, decode;      // decode: one step at the average context length
    double ttft_s = 0;               // prefill of the whole pass
    double decode_tps_per_seq = 0;   // tokens/s one sequence sees while decoding
    double decode_tps_aggregate = 0; // tokens/s of the whole pass while decoding
    double throughput_tps = 0;       // generated tokens / (prefill + decode) for the pass
    double total_s = 0;              // prefill + all decode steps of one pass
    double objective_s = 0;          // seconds per generated token (per sequence, or per pass for throughput)
    MemoryUse used;
    bool operator==(const Prediction&) const = default;
};

struct Budgets {
    double gpu = 0, dram = 0, nvme = 0;  // bytes the plan may use on each tier
    bool operator==(const Budgets&) const = default;
};

// The LP's fractional answer for one group of identical consecutive layers.
struct GroupSolution {
    int32_t first_layer = 0, n_layers = 0;
    std::array<double, kNumWeightOptions> weights{};
    std::array<double, kNumKvOptions> kv{};
    bool operator==(const GroupSolution&) const = default;
};

struct Plan {
    // Identity of what it was made for, checked when it is loaded.
    std::string model_name;
    int32_t n_layer = 0;
    uint64_t model_weight_bytes = 0;
    DType weight_type = DType::F16;
    std::string hardware;  // profile summary
    Budgets budgets;
    Workload workload;
    Policy policy;

    bool has_gpu = false;
    WeightOption output = WeightOption::Gpu;     // the logits matmul
    WeightOption embedding = WeightOption::DramCpu;  // looked up only: Gpu, DramCpu or NvmeCpu
    HiddenOption hidden = HiddenOption::Gpu;
    std::vector<LayerPlacement> layers;
    // A mixture of experts whose routed experts are placed apart from their layers: then a
    // layer at nvme(cpu) keeps its other tensors in DRAM and its experts on NVMe behind the
    // DRAM expert cache; a layer at dram(cpu) is resident whole.
    ExpertPlan experts;
    Prediction prediction;

    // The LP: its plain relaxation (a lower bound for any plan under this policy), the LP
    // re-solved with staging buffers reserved for whole layers (what was rounded), and what
    // whole layers cost against the bound: (rounded - bound) / bound, never negative.
    double lp_bound_s = 0;
    double lp_objective_s = 0;
    double rounding_loss = 0;
    std::vector<GroupSolution> lp_groups;

    std::string to_json() const;
    // Throws UsageError naming what is malformed or inconsistent.
    static Plan from_json(std::string_view text);
    // Throws UsageError when the plan was made for a different model (layers, bytes).
    void check_matches(const ModelShape& shape) const;
    bool operator==(const Plan&) const = default;
};

}  // namespace strata::planner
