// A drafting engine beside its target under a DRAM budget: the target plans around the share
// sized from its own options, and the drafting engine runs within exactly that share, every
// layer in memory; without a budget neither is limited.
#include <catch2/catch.hpp>

#include "core/error.h"
#include "runtime/kv/kv_cache.h"
#include "runtime/spec/draft_engine.h"
#include "runtime/spec/self_drafter.h"
#include "tests/support/engine_options.h"
#include "tests/support/gguf_writer.h"
#include "tests/support/model_paths.h"

using namespace strata;
using namespace strata::runtime;

TEST_CASE("draft engine: held within the target's --dram, every layer in memory, sized from the target's options", "[unit][spec]") {
    const auto model = test::tiny_llama_path();
    for (const DraftSource& source : {DraftSource{}, DraftSource{model}}) {
        INFO((source.early_layers() ? "the target's first layers" : "a draft model"));
        EngineOptions o = test::engine_options(model, 256);
        o.draft = source;
        {
            Engine unbudgeted(o);
            CHECK(unbudgeted.dram_beside() == 0);  // no budget, no share
        }
        o.dram_budget = uint64_t{256} << 20;
        const uint64_t share = draft_share(o, source);
        REQUIRE(share > 0);
        Engine target(o);
        CHECK(target.dram_beside() == share);
        CHECK(target.dram().used() <= o.dram_budget);

        // Sized before the target loaded as it runs beside the loaded target.
        const EngineOptions before = draft_engine_options(o, source), after = draft_engine_options(target, source);
        CHECK(before.n_ctx == target.n_ctx());
        CHECK(before.kv_positions == target.kv_cache().pool().n_blocks() * KvCache::kBlockSize);
        CHECK(after.n_ctx == before.n_ctx);
        CHECK(after.kv_positions == before.kv_positions);
        CHECK(after.n_layers == before.n_layers);
        CHECK(after.n_layers == (source.early_layers() ? exit_candidates(target.hparams().n_layer).back() : 0));
        CHECK(after.dram_budget == share);

        Engine draft(after);
        CHECK(draft.placement().residency.n_streamed() == 0);
        CHECK(draft.kv_cache().n_spilled() == 0);
        CHECK(draft.dram().used() <= after.dram_budget);

        // A budget the two cannot share is refused, naming the drafting engine's part.
        EngineOptions tight = o;
        tight.dram_budget = share;
        CHECK_THROWS_WITH(Engine(tight), Catch::Contains("the drafting engine beside the model"));
    }
    // A draft model's file that cannot be read is named as the draft model's.
    EngineOptions o = test::engine_options(model, 256);
    o.dram_budget = uint64_t{256} << 20;
    o.draft = DraftSource{test::temp_path("no_such_draft.gguf")};
    CHECK_THROWS_WITH(Engine(o), Catch::Contains("the draft model"));
}
