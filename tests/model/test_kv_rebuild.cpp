// A plan that recomputes KV from saved hidden states, run on SmolLM2: with an F32 cache the
// rebuilt layers give the logits of stored K and V bit for bit (block-quantized weights make
// each row's matmul independent of its batch), prompt and greedy decode alike.
#include <catch2/catch.hpp>

#include <algorithm>
#include <optional>

#include "planner/plan.h"
#include "runtime/engine.h"
#include "runtime/kv/kv_cache.h"
#include "runtime/place/placement.h"
#include "tests/support/model_paths.h"

using namespace strata;
using namespace strata::runtime;

namespace {
// Logits of a prompt's last token, then of 24 greedy steps, in a sequence of the engine's.
std::vector<float> prompt_and_decode(Engine& engine, const std::vector<int32_t>& prompt) {
    const int64_t V = engine.hparams().n_vocab;
    const SeqId seq = engine.create_seq();
    const SeqTokens first{seq, prompt};
    auto logits = engine.eval_batch({&first, 1});
    std::vector<float> all(logits.begin(), logits.begin() + V);
    for (int i = 0; i < 24; ++i) {
        const auto tok = static_cast<int32_t>(std::max_element(logits.begin(), logits.begin() + V) - logits.begin());
        const SeqTokens step{seq, {&tok, 1}};
        logits = engine.eval_batch({&step, 1});
        all.insert(all.end(), logits.begin(), logits.begin() + V);
    }
    engine.free_seq(seq);
    return all;
}
}  // namespace

TEST_CASE("SmolLM2: a plan's recomputed KV layers give the logits of stored K/V", "[model]") {
    auto path = test::default_model_path();
    STRATA_REQUIRE_MODEL(path, "the default SmolLM2 model (run scripts/fetch_model.sh)");
    EngineOptions o;
    o.model = *path;
    o.n_ctx = 256;
    o.kv_type = DType::F32;
    o.gpu.gpu_mem = 0;  // the CPU backend rebuilds K and V
    std::optional<planner::Plan> made;
    o.on_plan = [&](const Placement& p) { made = p.plan; };
    std::vector<int32_t> prompt(70);
    for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(100 + 37 * i % 5000);

    Engine stored(o);
    REQUIRE(made);
    REQUIRE(stored.kv_cache().n_rebuilt() == 0);
    const auto want = prompt_and_decode(stored, prompt);

    planner::Plan recompute = *made;
    recompute.policy.recompute = true;
    for (auto& l : recompute.layers)
        if (l.layer % 2 == 1) l.kv = planner::KvOption::ActDram;
    o.plan = planner::Plan::from_json(recompute.to_json());  // as `--plan FILE` reads it
    o.on_plan = {};
    Engine rebuilt(o);
    CHECK(rebuilt.kv_cache().n_rebuilt() == stored.hparams().n_layer / 2);
    CHECK(rebuilt_layers(*o.plan)[1]);
    CHECK(prompt_and_decode(rebuilt, prompt) == want);
}
