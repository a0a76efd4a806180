#include "tests/support/tiny_engine.h"

#include "tests/support/gguf_writer.h"
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

TinyForward::TinyForward(const std::string& name, const nlohmann::json& config, uint64_t seed)
    : TinyModelFile(name, config, seed), store(file, hp, unlimited, planned(file, hp, unlimited)), fwd(hp, store) {}

std::vector<float> TinyForward::prompt_then_steps(std::span<const int32_t> ids, size_t n_prompt, runtime::KvCache& kv) {
    return test::prompt_then_steps(fwd, pool, ids, n_prompt, kv);
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

std::vector<float> prompt_then_steps(runtime::Backend& backend, cpu::ThreadPool& pool, std::span<const int32_t> ids,
                                     size_t n_prompt, runtime::KvCache& kv) {
    std::vector<float> all, step;
    pool.run([&] { backend.eval(ids.first(n_prompt), kv, all, true); });
    for (size_t i = n_prompt; i < ids.size(); ++i) {
        pool.run([&] { backend.eval(ids.subspan(i, 1), kv, step, false); });
        all.insert(all.end(), step.begin(), step.end());
    }
    return all;
}

}  // namespace strata::test
