#include "tests/support/tiny_engine.h"

#include <catch2/catch.hpp>

#include "tests/support/gguf_writer.h"
#include "gpu/device.h"
#include "runtime/exec/device/device_backend.h"
#include "runtime/place/placement.h"
#include "tests/support/planned.h"
#include "tests/support/tiny_model.h"

namespace strata::test {

namespace {
std::filesystem::path written(const std::string& name, const nlohmann::json& config, uint64_t seed) {
    auto path = temp_path(name);
    write_tiny_model(config, seed, 1e-5f, path);
    return path;
}
}  // namespace

TinyModelFile::TinyModelFile(const std::string& name, const nlohmann::json& config, uint64_t seed)
    : path(written(name, config, seed)), file(models::GgufFile::open(path)), hp(models::Hparams::from_gguf(file)) {}

TinyCpuModel::TinyCpuModel(const std::string& name, const nlohmann::json& config, uint64_t seed)
    : TinyModelFile(name, config, seed), store(file, hp, unlimited, planned(file, hp, unlimited)), backend(hp, store) {}

std::vector<float> TinyCpuModel::prompt_then_steps(std::span<const int32_t> ids, size_t n_prompt, runtime::KvCache& kv,
                                                   runtime::SeqId seq) {
    return test::prompt_then_steps(backend, pool, ids, n_prompt, kv, seq);
}

std::vector<float> sim_device_logits(const TinyModelFile& m, runtime::WeightStore& store, std::span<const int32_t> ids,
                                     size_t n_prompt, int n_ctx, runtime::KvPlacement kv_at,
                                     const std::vector<std::vector<int32_t>>& experts, bool graphs, uint64_t* launches) {
    storage::MemoryBudget dram("DRAM", UINT64_MAX);
    gpu::SimOptions o;
    o.budget_bytes = uint64_t{256} << 20;
    o.link_gbps = 50;
    runtime::KvCache kv(m.hp.n_layer, n_ctx, m.hp.n_embd_kv());
    runtime::DeviceBackendOptions opts;
    opts.kv = kv_at;
    opts.experts = experts;
    opts.graphs = graphs;
    runtime::DeviceBackend dev(gpu::make_sim_device(o), m.hp, store, kv, dram, opts);
    cpu::ThreadPool pool(1);
    std::vector<float> logits = prompt_then_steps(dev, pool, ids, n_prompt, kv);
    if (launches) *launches = dev.graph_launches();
    return logits;
}

SmallExpertCache::SmallExpertCache(const TinyModelFile& m) {
    storage::MemoryBudget unlimited("DRAM", UINT64_MAX);
    in = runtime::WeightStore::residency_input(m.file, m.hp, unlimited, 0, 2);
    in.budget = in.fixed_bytes + in.other_bytes + runtime::ring_bytes(in.expert_slot_bytes, m.hp.moe.n_expert) + 4096;
    for (uint64_t d : in.dense_bytes) in.budget += d;
    runtime::PlacementOptions o;
    o.n_ctx = 64;
    o.overrides = {runtime::parse_tensor_override("exps=nvme")};
    runtime::Placement p = runtime::place(m.file, in, o);
    residency = p.residency;
    plan = p.plan.experts;
}

std::vector<float> eval_seq(runtime::Backend& backend, cpu::ThreadPool& pool, runtime::KvCache& kv, runtime::SeqId seq,
                            std::span<const int32_t> tokens, bool all_logits) {
    REQUIRE(kv.reserve(seq, static_cast<int32_t>(tokens.size())));
    const runtime::SeqTokens entry{seq, tokens, all_logits ? runtime::PassOutput::AllLogits : runtime::PassOutput::Logits};
    std::vector<float> logits;
    pool.run([&] { backend.eval_batch({&entry, 1}, kv, logits); });
    return logits;
}

std::vector<float> prompt_then_steps(runtime::Backend& backend, cpu::ThreadPool& pool, std::span<const int32_t> ids,
                                     size_t n_prompt, runtime::KvCache& kv, runtime::SeqId seq) {
    if (seq < 0) seq = kv.create_seq();
    std::vector<float> all = eval_seq(backend, pool, kv, seq, ids.first(n_prompt), true);
    for (size_t i = n_prompt; i < ids.size(); ++i) {
        const std::vector<float> step = eval_seq(backend, pool, kv, seq, ids.subspan(i, 1), false);
        all.insert(all.end(), step.begin(), step.end());
    }
    return all;
}

}  // namespace strata::test
