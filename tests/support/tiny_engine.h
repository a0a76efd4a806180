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
#include "runtime/exec/forward.h"
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
// Forward over it and two threads to run it.
struct TinyForward : TinyModelFile {
    storage::MemoryBudget unlimited{"DRAM", UINT64_MAX};
    runtime::WeightStore store;
    runtime::Forward fwd;
    cpu::ThreadPool pool{2};

    TinyForward(const std::string& name, const nlohmann::json& config, uint64_t seed);

    // Logits of every one of ids' first n_prompt tokens evaluated together into kv, then of
    // each later token evaluated alone, in order.
    std::vector<float> prompt_then_steps(std::span<const int32_t> ids, size_t n_prompt, runtime::KvCache& kv);
};

// A mixture of experts' budget and residency that send every layer's routed experts through a
// cache of as few slots as allowed: one layer's experts, so most choices evict.
struct SmallExpertCache {
    runtime::ResidencyInput in;
    runtime::Residency residency;
    planner::ExpertPlan plan;

    explicit SmallExpertCache(const TinyModelFile& m);
};

// The same on any backend, run on `pool`.
std::vector<float> prompt_then_steps(runtime::Backend& backend, cpu::ThreadPool& pool, std::span<const int32_t> ids,
                                     size_t n_prompt, runtime::KvCache& kv);

}  // namespace strata::test
