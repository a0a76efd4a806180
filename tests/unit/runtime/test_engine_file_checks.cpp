// An engine refuses a file whose parts disagree before it runs anything: a tokenizer with fewer
// tokens than the embeddings' rows (the model sampled ids it could not decode) or more (a prompt's
// id past the rows failed mid-run), as llama.cpp refuses such a file.
#include <catch2/catch.hpp>

#include "core/error.h"
#include "runtime/engine.h"
#include "tests/support/engine_options.h"
#include "tests/support/fixtures.h"
#include "tests/support/gguf_writer.h"
#include "tests/support/tiny_model.h"

using namespace strata;

TEST_CASE("engine: a tokenizer whose size is not token_embd.weight's rows is refused, naming both", "[unit][engine]") {
    const auto fx = test::model_fixture("tiny_arch_logits.json");
    const auto config = test::with_vocabulary(test::with_q8_0(fx["models"][0]["config"]));
    const int n_tokens = config["n_vocab"];
    for (const int rows : {n_tokens - 12, n_tokens + 12, n_tokens}) {
        auto c = config;
        c["n_vocab"] = rows;
        const auto path = test::temp_path("vocab_rows_" + std::to_string(rows) + ".gguf");
        test::write_tiny_model(c, fx["seed"], 1e-5f, path);
        INFO("rows " << rows << " tokens " << n_tokens);
        if (rows == n_tokens) {
            CHECK_NOTHROW(runtime::Engine(test::engine_options(path, 64)));
        } else {
            CHECK_THROWS_AS(runtime::Engine(test::engine_options(path, 64)), FormatError);
            CHECK_THROWS_WITH(runtime::Engine(test::engine_options(path, 64)),
                              Catch::Contains(std::to_string(n_tokens) + " tokens") &&
                                  Catch::Contains(std::to_string(rows) + " rows in token_embd.weight"));
        }
    }
}
