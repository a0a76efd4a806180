// A cap on a reasoning model's reasoning: where the count starts and stops, what is forced and
// when; and, generating with stories260K, that a capped reply is the free reply's first tokens,
// the closer, then what the model writes after that text.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "models/tokenizer.h"
#include "runtime/engine.h"
#include "runtime/reasoning_budget.h"
#include "tests/support/engine_options.h"
#include "tests/support/generate.h"
#include "tests/support/model_paths.h"

using namespace strata;
using namespace strata::runtime;
using models::ReasoningStyle;

namespace {

const std::vector<int32_t> kForced{101, 102, 103};

// The tokens forced while the reply takes `pieces`, then the forced ones as far as they go:
// the piece index at which forcing began (-1: never) and what it forced.
struct Run {
    int forced_at = -1;
    std::vector<int32_t> forced;
};
Run run(ReasoningBudget& b, const std::vector<std::string>& pieces) {
    Run r;
    for (size_t i = 0; i <= pieces.size(); ++i) {
        if (b.forced()) {
            r.forced_at = static_cast<int>(i);
            while (auto t = b.forced()) r.forced.push_back(*t), b.accept("x");
            return r;
        }
        if (i < pieces.size()) b.accept(pieces[i]);
    }
    return r;
}

}  // namespace

TEST_CASE("a reasoning budget counts the reasoning's tokens from its opening and forces the closer once spent", "[unit][chat]") {
    SECTION("Qwen3's block, opened by the reply") {
        ReasoningBudget b(3, ReasoningStyle::ThinkBlock, kForced);
        const Run r = run(b, {"\n", "<think>", "a", "b", "c", "d"});
        CHECK(r.forced_at == 5);  // after the opening and three tokens of it
        CHECK(r.forced == kForced);
        CHECK_FALSE(b.forced());  // once closed, the model writes on
    }
    SECTION("an opening token that writes reasoning too counts") {
        ReasoningBudget b(2, ReasoningStyle::ThinkBlock, kForced);
        CHECK(run(b, {"<think>\nSo", "x", "y"}).forced_at == 2);
    }
    SECTION("DeepSeek-R1's block, opened by the prompt: a budget of 0 closes it before the first token") {
        ReasoningBudget b(0, ReasoningStyle::OpenedThinkBlock, kForced);
        CHECK(b.forced() == kForced[0]);
        ReasoningBudget two(2, ReasoningStyle::OpenedThinkBlock, kForced);
        CHECK(run(two, {"a", "b", "c"}).forced_at == 2);
    }
    SECTION("gpt-oss's analysis message") {
        ReasoningBudget b(1, ReasoningStyle::HarmonyChannels, kForced);
        CHECK(run(b, {"<|channel|>", "analysis", "<|message|>", "Hmm", "more"}).forced_at == 4);
        ReasoningBudget final(1, ReasoningStyle::HarmonyChannels, kForced);
        CHECK(run(final, {"<|channel|>", "final", "<|message|>", "Hi", "there"}).forced_at == -1);
    }
    SECTION("a reasoning the model ends in time, or a reply without one, is left alone") {
        ReasoningBudget ended(3, ReasoningStyle::ThinkBlock, kForced);
        CHECK(run(ended, {"<think>", "a", "</", "think>", "answer", "goes", "on"}).forced_at == -1);
        ReasoningBudget answer(1, ReasoningStyle::ThinkBlock, kForced);
        CHECK(run(answer, {"Hello", "there", "friend"}).forced_at == -1);
        ReasoningBudget harmony(2, ReasoningStyle::HarmonyChannels, kForced);
        CHECK(run(harmony, {"<|channel|>", "analysis", "<|message|>", "ok", "<|end|>", "<|start|>", "x", "y"}).forced_at == -1);
    }
    SECTION("a character is never cut in two") {
        ReasoningBudget b(1, ReasoningStyle::OpenedThinkBlock, kForced);
        CHECK(run(b, {"\xE2\x82", "\xAC", "z"}).forced_at == 2);  // the euro sign's first two bytes, then its last
    }
}

TEST_CASE("a capped reply is the free reply's first tokens, the closer, then the model's own continuation", "[unit][engine]") {
    auto path = test::stories260k_path();
    STRATA_REQUIRE_MODEL(path, "stories260K.gguf");
    Engine engine(test::engine_options(*path, 256));
    const models::Tokenizer& tok = engine.tokenizer();
    const std::vector<int32_t> prompt = tok.encode("Once upon a time", tok.add_bos_default(), false);
    GenerateParams free;
    free.n_predict = 40;
    free.sampler.temperature = 0;
    free.ignore_eos = true;
    const GenerateResult reference = test::generate(engine, prompt, free);
    REQUIRE(reference.tokens.size() == 40);

    const int budget = GENERATE(0, 6);
    // (A message that writes a control token's text is read as text: "</s>" is not EOS.)
    const std::string message = GENERATE(std::string(), std::string("Time to answer."), std::string("</s>"));
    GenerateParams capped = free;
    capped.reasoning_budget = {budget, ReasoningStyle::OpenedThinkBlock, message};
    const models::TextRange literal{0, message.size()};
    const std::vector<int32_t> forced =
        tok.encode(message + std::string(models::reasoning_closer(ReasoningStyle::OpenedThinkBlock)), false, true, false, {&literal, 1});
    for (const int32_t t : forced) CHECK_FALSE(tok.is_control(t));
    // Speculating by lookup (drafts verified through the same draw) and plainly, alike.
    for (const SpecMode mode : {SpecMode::Off, SpecMode::Lookup}) {
        SpecOptions spec;
        spec.mode = mode;
        const GenerateResult r = test::generate(engine, prompt, capped, spec);
        INFO("budget " << budget << ", message '" << message << "', speculation " << int(mode) << ": " << r.text);
        REQUIRE(r.tokens.size() == 40);
        std::vector<int32_t> want(reference.tokens.begin(), reference.tokens.begin() + budget);
        want.insert(want.end(), forced.begin(), forced.end());
        // The rest: what the model writes after the prompt, the free tokens kept and the closer.
        std::vector<int32_t> resumed = prompt;
        resumed.insert(resumed.end(), want.begin(), want.end());
        GenerateParams rest = free;
        rest.n_predict = 40 - static_cast<int32_t>(want.size());
        const GenerateResult after = test::generate(engine, resumed, rest);
        want.insert(want.end(), after.tokens.begin(), after.tokens.end());
        CHECK(r.tokens == want);
    }
}
