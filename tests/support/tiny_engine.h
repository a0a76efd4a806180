#pragma once
// A tiny random-weight model (tests/support/tiny_model.h) written to a temporary file and
// opened, and the same with every weight resident and a forward pass ready: the setup of the
// runtime tests that build the pieces below Engine themselves.
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cpu/thread_pool.h"
#include "models/gguf_file.h"
#include "models/hparams.h"
#include "planner/expert_plan.h"
#include "runtime/exec/cpu/cpu_backend.h"
#include "runtime/place/kv_placement.h"
#include "runtime/weights/weight_store.h"
#include "storage/budget.h"

namespace strata::test {

// The model `config` (a tiny_config) with weights from `seed`, written to temp_path(name) and opened.
struct TinyModelFile {
    std::filesystem::path path;
    models::GgufFile file;
    models::Hparams hp;

    TinyModelFile(const std::string& name, const nlohmann::json& config, uint64_t seed);
};

// That model with every weight resident (an unlimited DRAM budget, residency as planned), a
// CpuBackend over it and two threads to run it.
struct TinyCpuModel : TinyModelFile {
    storage::MemoryBudget unlimited{"DRAM", UINT64_MAX};
    runtime::WeightStore store;
    runtime::CpuBackend backend;
    cpu::ThreadPool pool{2};

    TinyCpuModel(const std::string& name, const nlohmann::json& config, uint64_t seed);

    // Logits of every one of ids' first n_prompt tokens evaluated together into sequence `seq`
    // of kv (-1: a new one), then of each later token evaluated alone, in order.
    std::vector<float> prompt_then_steps(std::span<const int32_t> ids, size_t n_prompt, runtime::KvCache& kv,
                                         runtime::SeqId seq = -1);
};

// A mixture of experts' budget and residency that send every layer's routed experts through a
// cache of as few slots as allowed: one layer's experts, so most choices evict.
struct SmallExpertCache {
    runtime::ResidencyInput in;
    runtime::Residency residency;
    planner::ExpertPlan plan;

    explicit SmallExpertCache(const TinyModelFile& m);
};

// `tokens` appended to sequence `seq` of `kv` on `backend` (its blocks reserved first), run on
// `pool`: the logits of every token, or of the last one.
std::vector<float> eval_seq(runtime::Backend& backend, cpu::ThreadPool& pool, runtime::KvCache& kv, runtime::SeqId seq,
                            std::span<const int32_t> tokens, bool all_logits);
// The logits of prompt_then_steps on the simulated device (256 MiB, a 50 GB/s link) over `store`
// in a cache of n_ctx positions: the KV cache where `kv_at` says, `experts` (per layer) held there;
// decode steps as captured graphs unless `graphs` is false, the number launched in `launches`.
std::vector<float> sim_device_logits(const TinyModelFile& m, runtime::WeightStore& store, std::span<const int32_t> ids,
                                     size_t n_prompt, int n_ctx, runtime::KvPlacement kv_at = runtime::KvPlacement::Device,
                                     const std::vector<std::vector<int32_t>>& experts = {}, bool graphs = true,
                                     uint64_t* launches = nullptr);
// The same as TinyCpuModel::prompt_then_steps on any backend, run on `pool`.
std::vector<float> prompt_then_steps(runtime::Backend& backend, cpu::ThreadPool& pool, std::span<const int32_t> ids,
                                     size_t n_prompt, runtime::KvCache& kv, runtime::SeqId seq = -1);

}  // namespace strata::test
