// Each supported architecture's forward pass against the numpy reference, on tiny
// random-weight F32 models rebuilt from tests/fixtures/model/tiny_arch_logits.json.
#include <catch2/catch.hpp>


#include <nlohmann/json.hpp>

#include "cpu/thread_pool.h"
#include "models/gguf_file.h"
#include "models/hparams.h"
#include "runtime/exec/forward.h"
#include "runtime/kv/kv_cache.h"
#include "runtime/weights/weight_store.h"
#include "storage/budget.h"
#include "tests/support/fixtures.h"
#include "tests/support/gguf_writer.h"
#include "tests/support/planned.h"
#include "tests/support/tiny_model.h"

using namespace strata;
using namespace strata::models;
using namespace strata::runtime;

TEST_CASE("llama, mistral and qwen2 forward passes match the reference logits", "[unit][arch]") {
    const auto fx = test::model_fixture("tiny_arch_logits.json");
    const auto ids = fx["ids"].get<std::vector<int32_t>>();
    cpu::ThreadPool pool(2);

    for (const auto& m : fx["models"]) {
        const std::string arch = m["config"]["arch"];
        SECTION(arch) {
            auto path = test::temp_path("tiny_" + arch + ".gguf");
            test::write_tiny_model(m["config"], fx["seed"], fx["rms_eps"], path);
            auto file = GgufFile::open(path);
            auto hp = Hparams::from_gguf(file);
            CHECK(arch_name(hp.arch) == arch);
            storage::MemoryBudget unlimited("DRAM", UINT64_MAX);
            WeightStore weights(file, hp, unlimited, test::planned(file, hp, unlimited));
            Forward fwd(hp, weights);
            KvCache kv(hp.n_layer, 64, hp.n_embd_kv());

            // Prefill half as a batch, then the rest one token at a time: both paths are checked.
            std::vector<float> all, logits;
            const size_t half = ids.size() / 2;
            pool.run([&] { fwd.eval(std::span(ids).first(half), kv, all, true); });
            for (size_t i = half; i < ids.size(); ++i) {
                pool.run([&] { fwd.eval(std::span(ids).subspan(i, 1), kv, logits, false); });
                all.insert(all.end(), logits.begin(), logits.end());
            }
            const auto& ref = m["logits"];
            REQUIRE(all.size() == ids.size() * hp.n_vocab);
            double max_diff = 0;
            for (size_t t = 0; t < ids.size(); ++t)
                for (int v = 0; v < hp.n_vocab; ++v)
                    max_diff = std::max(max_diff, std::abs(all[t * hp.n_vocab + v] - ref[t][v].get<double>()));
            INFO(arch << ": max |logit - reference| = " << max_diff);
            CHECK(max_diff < 1e-3);
        }
    }
}
