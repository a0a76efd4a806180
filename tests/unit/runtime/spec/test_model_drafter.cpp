// A draft model must share the target's vocabulary: the check names the first difference.
#include <catch2/catch.hpp>

#include "core/error.h"
#include "runtime/engine.h"
#include "runtime/spec/model_drafter.h"
#include "tests/support/engine_options.h"
#include "tests/support/model_paths.h"

using namespace strata;
using namespace strata::runtime;

TEST_CASE("draft model: a vocabulary unlike the target's is refused, its own accepted", "[unit][spec]") {
    auto smollm2 = test::default_model_path();
    STRATA_REQUIRE_MODEL(smollm2, "SmolLM2 model");
    Engine tiny(test::engine_options(test::tiny_llama_path(), 64));
    Engine big(test::engine_options(*smollm2, 64));
    CHECK_NOTHROW(check_same_vocabulary(tiny.tokenizer(), tiny.tokenizer()));
    CHECK_THROWS_WITH(check_same_vocabulary(big.tokenizer(), tiny.tokenizer()), Catch::Contains("vocabulary"));
}
