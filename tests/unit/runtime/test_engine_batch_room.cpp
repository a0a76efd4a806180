// The working memory an engine reserves at load holds the logits of the sequences a pass may
// hold (a batch's, a server's --max-batch), so a budget's placement leaves room for them.
#include <catch2/catch.hpp>

#include "runtime/engine.h"
#include "tests/support/engine_options.h"
#include "tests/support/model_paths.h"

using namespace strata;

TEST_CASE("engine: room for a batch's logits is reserved at load", "[unit][engine]") {
    runtime::EngineOptions eo = test::engine_options(test::tiny_llama_path(), 64);
    const auto used = [&](int n_batch, int max_sequences) {
        eo.n_batch = n_batch;
        eo.max_sequences = max_sequences;
        const runtime::Engine e(eo);
        return std::pair{e.dram().used(), uint64_t(e.hparams().n_vocab)};
    };
    const auto [one, n_vocab] = used(1, 0);
    // Each sequence past the first: a row of logits and the pass's copy of it.
    CHECK(used(8, 0).first - one == 2 * 7 * n_vocab * sizeof(float));
    CHECK(used(1, 8).first - one == 2 * 7 * n_vocab * sizeof(float));  // serve: planned for one, room for --max-batch
}
