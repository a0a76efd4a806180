// Continuous batching on SmolLM2: greedy requests sharing forward passes give exactly the
// tokens each gives alone, a shared prompt prefix is computed once, and a cancelled request
// gives its KV blocks back.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <future>

#include "runtime/engine.h"
#include "runtime/kv/kv_cache.h"
#include "runtime/scheduler.h"
#include "tests/support/engine_options.h"
#include "tests/support/generate.h"
#include "tests/support/greedy.h"
#include "tests/support/model_paths.h"

using namespace strata;
using namespace strata::runtime;

namespace {
const char* const kTopics[] = {"the moon", "bread", "rivers", "chess", "volcanoes", "bees", "trains", "the ocean",
                               "music", "winter", "robots", "gardens", "mountains", "libraries", "coffee", "clocks"};

std::vector<int32_t> chat_prompt(const Engine& e, const std::string& user) {
    const std::string text = "<|im_start|>user\n" + user + "<|im_end|>\n<|im_start|>assistant\n";
    return e.tokenizer().encode(text, false, true);
}
}  // namespace

TEST_CASE("SmolLM2: 16 greedy requests batched 8 at a time give the tokens of each alone", "[model][scheduler]") {
    auto path = test::default_model_path();
    STRATA_REQUIRE_MODEL(path, "SmolLM2-135M-Instruct.Q4_1.gguf");
    EngineOptions eo;
    eo.model = *path;
    eo.n_ctx = 1024;
    eo.kv_positions = 2048;
    Engine engine(eo);
    constexpr int kTokens = 24;

    std::vector<std::vector<int32_t>> prompts;
    for (const char* topic : kTopics) prompts.push_back(chat_prompt(engine, std::string("Write one sentence about ") + topic + "."));
    // Shares a long prefix with the last prompt, sent after it has finished.
    const std::string long_question =
        "You are a careful assistant. Answer in plain words, without lists, and keep to the point. "
        "The question is about the water cycle on Earth: how does rain form, ";
    const auto base = chat_prompt(engine, long_question + "and where does it go?");
    const auto sharing = chat_prompt(engine, long_question + "and why are clouds white?");

    std::vector<std::vector<int32_t>> want;
    for (const auto& p : prompts) want.push_back(test::generate(engine, p, test::greedy(kTokens)).tokens);
    const auto want_base = test::generate(engine, base, test::greedy(kTokens)).tokens;
    const auto want_sharing = test::generate(engine, sharing, test::greedy(kTokens)).tokens;
    // Blocks the runs alone left cached are evicted as needed; none is in use.
    REQUIRE(engine.kv().pool().n_used() == 0);

    std::vector<GenerateResult> results(prompts.size());
    Scheduler sched(engine, {8, 64});
    const auto t0 = std::chrono::steady_clock::now();
    // Which request each piece of text came from, in order (on the scheduler's thread): requests
    // in one batch interleave theirs.
    std::vector<size_t> texts_before_first_done;
    bool first_done = false;
    for (size_t i = 0; i < prompts.size(); ++i) {
        Request r;
        r.prompt = prompts[i];
        r.params = test::greedy(kTokens);
        r.on_text = [&, i](std::string_view) {
            if (!first_done) texts_before_first_done.push_back(i);
            return true;
        };
        r.on_done = [&results, &first_done, i](const GenerateResult& g) {
            results[i] = g;
            first_done = true;
        };
        sched.submit(std::move(r));
    }
    sched.wait_idle();
    // Before any request finished, several had produced text: they decoded in one batch.
    std::sort(texts_before_first_done.begin(), texts_before_first_done.end());
    CHECK(std::unique(texts_before_first_done.begin(), texts_before_first_done.end()) - texts_before_first_done.begin() > 1);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    uint64_t generated = 0;
    for (size_t i = 0; i < prompts.size(); ++i) {
        INFO("prompt " << i << " (" << kTopics[i] << ")");
        CHECK(results[i].stop_reason != "error");
        CHECK(results[i].tokens == want[i]);
        generated += results[i].tokens.size();
    }
    WARN("16 requests, max_batch 8: " << generated << " tokens in " << seconds << " s = " << generated / seconds << " tokens/s");

    {  // a prompt sharing a cached prefix reuses its blocks and gives the same tokens
        GenerateResult first, second;
        Request r;
        r.prompt = base;
        r.params = test::greedy(kTokens);
        r.on_done = [&](const GenerateResult& g) { first = g; };
        sched.submit(std::move(r));
        sched.wait_idle();
        const uint64_t cached_before = sched.stats().cached_tokens;
        r = {};
        r.prompt = sharing;
        r.params = test::greedy(kTokens);
        r.on_done = [&](const GenerateResult& g) { second = g; };
        sched.submit(std::move(r));
        sched.wait_idle();
        CHECK(first.tokens == want_base);
        CHECK(second.tokens == want_sharing);
        CHECK(second.cached_tokens >= 32);
        CHECK(second.cached_tokens % KvCache::kBlockSize == 0);
        CHECK(sched.stats().cached_tokens - cached_before == uint64_t(second.cached_tokens));
    }
    {  // cancel mid-generation frees the sequence's blocks
        const int32_t used_before = engine.kv().pool().n_used();
        std::promise<void> started;
        bool once = false;
        GenerateResult result;
        Request r;
        r.prompt = prompts[0];
        r.params = test::greedy(200, true);
        r.on_text = [&](std::string_view) {
            if (!once) started.set_value();
            once = true;
            return true;
        };
        r.on_done = [&](const GenerateResult& g) { result = g; };
        const uint64_t id = sched.submit(std::move(r));
        started.get_future().wait();
        sched.cancel(id);
        sched.wait_idle();
        CHECK(result.stop_reason == "cancelled");
        CHECK(result.tokens.size() < 200);
        CHECK(engine.kv().pool().n_used() == used_before);
    }
}

TEST_CASE("SmolLM2: a prompt whose cached prefix was evicted from DRAM gets it back from disk", "[model][scheduler]") {
    auto path = test::default_model_path();
    STRATA_REQUIRE_MODEL(path, "SmolLM2-135M-Instruct.Q4_1.gguf");
    EngineOptions eo = test::engine_options(*path, 512);
    eo.kv_positions = 128;  // 8 blocks: the second request's blocks evict the first's
    Engine engine(eo);
    const std::string preface =
        "You are a careful assistant. Answer in plain words, without lists, and keep to the point. Here is the "
        "story so far: a ferry crossed the river each morning, a mill turned by the weir, and the road north ";
    const auto first = chat_prompt(engine, preface + "carried grain to the city. What did the mill grind?");
    const auto other = chat_prompt(engine, std::string("Write three sentences about ") + kTopics[3] + " and why " +
                                               kTopics[4] + " erupt, with an example of each from history.");
    const auto again = chat_prompt(engine, preface + "carried grain to the city. Who used the ferry?");
    const auto want = test::generate(engine, again, test::greedy(16)).tokens;

    Scheduler sched(engine, {1, 8});
    auto run = [&](const std::vector<int32_t>& prompt) {
        GenerateResult out;
        Request r;
        r.prompt = prompt;
        r.params = test::greedy(16);
        r.on_done = [&](const GenerateResult& g) { out = g; };
        sched.submit(std::move(r));
        sched.wait_idle();
        return out;
    };
    run(first);
    run(other);  // takes the blocks the first left cached: they go to disk
    REQUIRE(engine.kv().n_prefix_spilled() > 0);
    const GenerateResult back = run(again);
    CHECK(engine.kv().n_prefix_restored() > 0);
    CHECK(back.cached_tokens >= 64);
    CHECK(back.tokens == want);
}
