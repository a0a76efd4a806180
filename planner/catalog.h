#pragma once
// The built-in catalog (planner/catalog/*.json, compiled in): GPUs, PCIe generations, NVMe
// drives, DRAM kinds, CPUs, whole systems and model shapes, each with the source of its
// numbers. `profile_from_catalog` turns a dry-run description ("rtx4090 + 64G DDR5 + gen4
// NVMe") into a HardwareProfile by applying the catalog's documented efficiency factors.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "planner/hardware_profile.h"

namespace strata::planner {

struct GpuEntry {
    std::string name;
    std::vector<std::string> aliases;
    uint64_t memory_bytes = 0;
    double mem_gbps = 0, fp16_tflops = 0;
    std::string pcie;  // "gen4"
    std::string source;
};
struct PcieEntry { std::string name; double x16_gbps = 0; std::string source; };
struct NvmeEntry { std::string name; double read_gbps = 0, write_gbps = 0; uint64_t capacity_bytes = 0; std::string example, source; };
struct DramEntry { std::string name; double channel_gbps = 0; std::string source; };
struct CpuEntry {
    std::string name;
    int cores = 0;
    double ghz = 0, fp32_flops_per_cycle = 0, per_core_gemv_gbps = 0;
    std::string dram;
    int channels = 0;
    std::string source;
};
struct SystemEntry {
    std::string name, gpu, cpu;
    uint64_t gpu_memory_bytes = 0, dram_bytes = 0, nvme_bytes = 0;
    double h2d_gbps = 0, d2h_gbps = 0, nvme_read_gbps = 0, nvme_write_gbps = 0, gpu_fp16_tflops = 0;
    double cpu_attention_gflops = 0, dram_read_gbps = 0;
    std::string source;
};
struct ModelEntry {
    std::string name, family;  // family: llama, qwen2, opt, olmoe, deepseek2, gpt-oss
    int32_t n_embd = 0, n_layer = 0, n_head = 0, n_head_kv = 0, n_ff = 0, n_vocab = 0, n_ctx_train = 0;
    int32_t head_dim = 0;  // 0: n_embd / n_head
    bool tied = false;
    // Experts (0: dense): the layers from n_dense_lead on route each token to n_expert_used of
    // n_expert experts n_ff_exp wide, beside n_expert_shared always-used ones as wide.
    int32_t n_expert = 0, n_expert_used = 0, n_ff_exp = 0, n_expert_shared = 0, n_dense_lead = 0;
    // deepseek2's latent attention (models/hparams.h MlaParams; kv_lora_rank 0: none).
    int32_t q_lora_rank = 0, kv_lora_rank = 0, qk_nope = 0, qk_rope = 0, v_head_dim = 0;
    int32_t n_swa = 0;          // gpt-oss: every other layer attends to the last n_swa positions
    std::string weight_type;    // the types of the shape when none is asked for ("Q4_K_M": llama.cpp's mix)
    std::string expert_type;    // the routed experts' own type whatever is asked for (gpt-oss: MXFP4)
    std::string source;
};
struct Efficiency { double gpu_gemm = 0.6, gpu_mem = 0.85, pcie = 0.8, dram_read = 0.7, nvme = 0.9, cpu_gemm = 0.4; };

class Catalog {
public:
    // Parsed once from the compiled-in JSON; a malformed catalog is a build bug (asserts).
    static const Catalog& builtin();
    // Parses catalog JSON texts; throws UsageError naming the bad entry.
    static Catalog parse(std::string_view hardware_json, std::string_view models_json);

    // Case-insensitive match on the name or an alias; nullptr when unknown.
    const GpuEntry* find_gpu(std::string_view name) const;
    // The entry whose name or alias occurs in a driver's device name ("NVIDIA GeForce RTX 4090").
    const GpuEntry* match_gpu_device(std::string_view device_name) const;
    const PcieEntry* find_pcie(std::string_view name) const;
    const NvmeEntry* find_nvme(std::string_view name) const;
    const DramEntry* find_dram(std::string_view name) const;
    const CpuEntry* find_cpu(std::string_view name) const;
    const SystemEntry* find_system(std::string_view name) const;
    const ModelEntry* find_model(std::string_view name) const;
    // "rtx3090, rtx4090, ..." for error hints.
    std::string gpu_names() const;
    std::string model_names() const;

    std::vector<GpuEntry> gpus;
    std::vector<PcieEntry> pcie;
    std::vector<NvmeEntry> nvme;
    std::vector<DramEntry> dram;
    std::vector<CpuEntry> cpus;
    std::vector<SystemEntry> systems;
    std::vector<ModelEntry> models;
    Efficiency efficiency;
};

// A machine described by catalog names and sizes, for dry-runs. Empty fields take defaults:
// the system's parts when `system` is set, else a Ryzen 9 7950X desktop with 64 GiB of
// 2-channel DDR5-4800 and a 2 TB Gen4 NVMe drive.
struct DryRunSpec {
    std::string system;                    // "flexgen-t4"
    std::string gpu;                       // catalog name, or "none"
    std::optional<uint64_t> gpu_memory;    // bytes; default: the GPU's
    std::string pcie;                      // "gen3|gen4|gen5"; default: the GPU's
    std::string cpu;                       // catalog name
    std::string dram_kind;                 // "ddr5-4800"; default: the CPU's
    int dram_channels = 0;                 // default: the CPU's
    std::optional<uint64_t> dram;          // installed bytes
    std::string nvme;                      // "gen3|gen4|gen5"
    std::optional<double> nvme_read_gbps;  // overrides the drive's read (and scales its write)
    std::optional<uint64_t> nvme_capacity;
};

// Throws UsageError (listing the known names) for an unknown name.
HardwareProfile profile_from_catalog(const DryRunSpec& spec, const Catalog& catalog = Catalog::builtin());
// `base` (this machine's probe, or a profile file) with the parts `parts` names in place of its
// own, each priced from its catalog entry: a GPU (or "none") with its link and memory, a link
// for base's own GPU, a CPU with its DRAM kind and channels, a disk generation. Capacities stay
// base's unless `parts` gives them. `parts.system` must be empty (a whole machine is
// profile_from_catalog's); a DRAM kind needs the CPU whose channels it fills. Throws UsageError.
HardwareProfile with_catalog_parts(HardwareProfile base, const DryRunSpec& parts, const Catalog& catalog = Catalog::builtin());

}  // namespace strata::planner
