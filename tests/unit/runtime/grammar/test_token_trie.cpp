#include <catch2/catch.hpp>

#include <random>

#include "models/gguf_file.h"
#include "runtime/grammar/gbnf.h"
#include "runtime/grammar/json_schema_grammar.h"
#include "runtime/grammar/token_trie.h"
#include "tests/support/model_paths.h"

#include <nlohmann/json.hpp>

using namespace strata;
using namespace strata::runtime;

namespace {
// allowed_tokens against the obvious reference: each token's bytes fed to the matcher alone.
void check_walk_against_each_token(const TokenTrie& trie, const std::shared_ptr<const Grammar>& g, int steps, uint32_t seed) {
    GrammarMatcher m(g);
    std::mt19937 rng(seed);
    std::vector<uint8_t> allowed;
    for (int step = 0; step < steps; ++step) {
        trie.allowed_tokens(m, allowed);
        std::vector<int32_t> choices;
        for (int32_t id = 0; id < trie.n_vocab(); ++id) {
            const bool want = trie.is_eog(id) ? m.complete() : !trie.piece(id).empty() && m.allows(trie.piece(id));
            INFO("step " << step << " token " << id << " '" << trie.piece(id) << "'");
            REQUIRE(bool(allowed[id]) == want);
            if (want && !trie.is_eog(id)) choices.push_back(id);
        }
        if (choices.empty()) break;
        REQUIRE(m.accept(trie.piece(choices[std::uniform_int_distribution<size_t>(0, choices.size() - 1)(rng)])));
    }
}
}  // namespace

TEST_CASE("the vocabulary trie allows exactly the tokens the grammar accepts next", "[unit][grammar]") {
    const std::filesystem::path path = test::tiny_llama_path();
    const models::GgufFile file = models::GgufFile::open(path);
    const auto tok = models::Tokenizer::from_gguf(file);
    const TokenTrie trie(*tok);
    CHECK(trie.n_vocab() == tok->n_vocab());
    const nlohmann::ordered_json schema = {{"type", "object"},
                                           {"properties", {{"name", {{"type", "string"}}}, {"tags", {{"type", "array"}, {"items", {{"enum", {"a b", "ü"}}}}}}}},
                                           {"required", {"name"}}};
    for (const std::string& gbnf : {std::string(R"(root ::= "Once upon a time" [ a-z]{1,30} "." )"),
                                    std::string(R"(root ::= ([a-z]+ " ")* "the end")"), json_schema_to_gbnf(schema)}) {
        INFO(gbnf);
        const auto g = std::make_shared<const Grammar>(parse_gbnf(gbnf));
        check_walk_against_each_token(trie, g, 25, 3);
    }
}
