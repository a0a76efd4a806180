#include <catch2/catch.hpp>

#include <cmath>

#include "models/gguf_file.h"
#include "runtime/grammar/grammar_constraint.h"
#include "runtime/sampler.h"
#include "tests/support/model_paths.h"

using namespace strata;
using namespace strata::runtime;

namespace {
struct Vocab {
    models::GgufFile file;
    std::unique_ptr<models::Tokenizer> tok;
    TokenTrie trie;
    explicit Vocab(const std::filesystem::path& p)
        : file(models::GgufFile::open(p)), tok(models::Tokenizer::from_gguf(file)), trie(*tok) {}
    int32_t id(const char* text) const { return *tok->find_token(text); }
};

std::shared_ptr<const Grammar> grammar(const char* gbnf) { return std::make_shared<const Grammar>(parse_gbnf(gbnf)); }
}  // namespace

TEST_CASE("a grammar constraint masks the logits of every token its grammar refuses", "[unit][grammar]") {
    const std::filesystem::path path = test::tiny_llama_path();
    const Vocab v(path);
    GrammarConstraint c(grammar(R"(root ::= "Once" " upon"?)"), v.trie);
    CHECK(c.active());
    std::vector<float> logits(v.tok->n_vocab(), 1.0f);
    REQUIRE(c.mask(logits));
    for (int32_t t = 0; t < v.tok->n_vocab(); ++t) {
        INFO(t << " '" << v.tok->piece(t) << "' " << v.tok->piece(t).size());
        CHECK(std::isinf(logits[t]) == !c.allows(t));
        CHECK(c.allows(t) == (!v.tok->is_eog(t) && std::string_view("Once").starts_with(v.tok->piece(t)) && !v.tok->piece(t).empty()));
    }
    for (const char* piece : {"O", "n", "ce"}) {
        const auto t = v.tok->find_token(piece);
        REQUIRE(t);
        REQUIRE(c.allows(*t));
        c.accept(*t);
    }
    // "Once" is whole: the end of the text, or " upon".
    CHECK(c.allows(v.tok->eos()));
    CHECK(c.allows(v.id("▁upon")));
    CHECK_FALSE(c.allows(v.id("▁a")));
}

TEST_CASE("whitespace after a complete sentence is refused unless more text may follow it", "[unit][grammar]") {
    const Vocab v(test::tiny_llama_path());
    const int32_t newline = v.id("<0x0A>"), space = v.id("<0x20>");
    // A JSON value's trailing space: the end of the text, not line breaks up to max_tokens.
    GrammarConstraint json(grammar(R"(root ::= "Once" [ \n]{0,20})"), v.trie);
    for (const char* piece : {"O", "n", "ce"}) json.accept(v.id(piece));
    CHECK(json.allows(v.tok->eos()));
    CHECK_FALSE(json.allows(newline));
    CHECK_FALSE(json.allows(space));
    std::vector<float> logits(v.tok->n_vocab(), 1.0f);
    REQUIRE(json.mask(logits));
    for (int32_t t = 0; t < v.tok->n_vocab(); ++t) CHECK(std::isinf(logits[t]) == !json.allows(t));
    CHECK_FALSE(std::isinf(logits[v.tok->eos()]));
    // Whitespace the grammar needs before more text is allowed.
    GrammarConstraint more(grammar(R"(root ::= "Once" (" " "upon")?)"), v.trie);
    for (const char* piece : {"O", "n", "ce"}) more.accept(v.id(piece));
    CHECK(more.allows(space));
    CHECK(more.allows(v.tok->eos()));
    // Free text is complete at every point: its line breaks stay allowed.
    GrammarConstraint free(grammar(R"(root ::= "Once" [^\x00]*)"), v.trie);
    for (const char* piece : {"O", "n", "ce"}) free.accept(v.id(piece));
    CHECK(free.allows(newline));
    CHECK(free.allows(space));
}

TEST_CASE("a lazy constraint lets the output run free until it writes a trigger", "[unit][grammar]") {
    const std::filesystem::path path = test::tiny_llama_path();
    const Vocab v(path);
    GrammarConstraint c(grammar(R"(root ::= "<" "x"+ ">")"), v.trie, {"<"});
    CHECK_FALSE(c.active());
    CHECK(c.allows(v.id("▁upon")));
    CHECK(c.allows(v.tok->eos()));
    c.accept(v.id("▁upon"));
    CHECK_FALSE(c.active());
    c.accept(v.id("<0x3C>"));  // "<": the trigger
    CHECK(c.active());
    CHECK_FALSE(c.allows(v.id("▁upon")));
    CHECK_FALSE(c.allows(v.tok->eos()));
    CHECK(c.allows(v.id("<0x78>")));  // "x"
    c.accept(v.id("<0x78>"));
    c.accept(v.id("<0x3E>"));  // ">": the grammar is done; only the end may follow
    CHECK(c.allows(v.tok->eos()));
    CHECK_FALSE(c.allows(v.id("<0x78>")));
}

TEST_CASE("a lazy constraint's triggers count only where triggers_from lets them: after a reasoning model's reasoning",
          "[unit][grammar]") {
    const Vocab v(test::tiny_llama_path());
    // Triggers may start after the first "|" (the reasoning's end, as models::answer_start finds it).
    const auto after_bar = [](std::string_view text) {
        const size_t bar = text.find('|');
        return bar == std::string_view::npos ? std::string_view::npos : bar + 1;
    };
    GrammarConstraint c(grammar(R"(root ::= "<" "x"+ ">")"), v.trie, {"<"}, after_bar);
    c.accept(v.id("<0x3C>"));  // "<" while reasoning: text
    CHECK_FALSE(c.active());
    CHECK(c.allows(v.id("▁upon")));  // which the grammar would refuse after a trigger
    c.accept(v.id("<0x7C>"));  // "|": the reasoning ends
    CHECK_FALSE(c.active());
    c.accept(v.id("<0x3C>"));  // "<": the trigger now
    CHECK(c.active());
    CHECK_FALSE(c.allows(v.id("▁upon")));
    CHECK(c.allows(v.id("<0x78>")));
}

TEST_CASE("a sampler with a grammar draws again among the tokens the grammar allows", "[unit][grammar][sampler]") {
    const std::filesystem::path path = test::tiny_llama_path();
    const Vocab v(path);
    SamplerParams p;
    p.temperature = 0;
    std::vector<float> logits(v.tok->n_vocab(), 0.0f);
    const int32_t yes = v.id("<0x79>"), no = v.id("<0x6E>"), best = v.id("▁upon");
    logits[best] = 9;
    logits[yes] = 2;
    logits[no] = 3;
    Sampler s(p, std::make_unique<GrammarConstraint>(grammar(R"(root ::= "y" | "n" "o")"), v.trie));
    CHECK(s.sample(logits) == no);  // the most likely of the allowed
    s.accept_generated(no);
    CHECK(s.sample(logits) == v.id("<0x6F>"));  // "o", though every other token is likelier
    // Free sampling is unchanged without a grammar.
    CHECK(Sampler(p).sample(logits) == best);
    // A grammar no token can continue: -1.
    Sampler dead(p, std::make_unique<GrammarConstraint>(grammar(R"(root ::= [^\x00-\U0010FFFF])"), v.trie));
    CHECK(dead.sample(logits) == -1);
}
