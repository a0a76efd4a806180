// stories260K (a real trained tiny llama, F32, SentencePiece) against its published greedy
// output, as recorded by the numpy reference in tests/fixtures/model/stories260k_greedy.json.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "runtime/engine.h"
#include "tests/support/engine_options.h"
#include "tests/support/fixtures.h"
#include "tests/support/generate.h"
#include "tests/support/model_paths.h"

using namespace strata;
using namespace strata::runtime;
using nlohmann::json;

TEST_CASE("stories260K: greedy text equals the published llama2.c output", "[unit][engine]") {
    auto path = test::stories260k_path();
    STRATA_REQUIRE_MODEL(path, "stories260K.gguf");
    const json f = test::model_fixture("stories260k_greedy.json");
    Engine engine(test::engine_options(*path, 256));
    auto ids = engine.tokenizer().encode(f["prompt"].get<std::string>(), engine.tokenizer().add_bos_default(), false);
    CHECK(json(ids) == f["prompt_ids"]);
    GenerateParams gp;
    gp.n_predict = 64;
    gp.sampler.temperature = 0;
    gp.ignore_eos = true;
    auto r = test::generate(engine, ids, gp);
    CHECK(json(r.tokens) == f["generated_ids"]);
    CHECK_THAT(f["prompt"].get<std::string>() + r.text, Catch::StartsWith(f["text"].get<std::string>().substr(0, 120)));
}
