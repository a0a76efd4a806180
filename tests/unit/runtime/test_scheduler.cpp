// Continuous batching: a pass over several sequences gives each the logits it gets alone,
// and the Scheduler's admission, queue limit and cancellation keep their promises.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <future>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "runtime/kv/kv_cache.h"
#include "runtime/scheduler.h"
#include "tests/support/engine_options.h"
#include "tests/support/gguf_writer.h"
#include "tests/support/generate.h"
#include "tests/support/greedy.h"
#include "tests/support/model_paths.h"
#include "tests/support/tiny_engine.h"
#include "tests/support/tiny_model.h"

using namespace strata;
using namespace strata::runtime;

namespace {
std::vector<int32_t> ids(int n, int salt) {
    std::vector<int32_t> t(n);
    for (int i = 0; i < n; ++i) t[i] = 1 + (i * 13 + salt * 29) % 90;
    return t;
}
}  // namespace

TEST_CASE("a batched pass gives every sequence the logits it gets alone, bit for bit", "[unit][scheduler]") {
    test::TinyCpuModel m("batch_model.gguf", test::tiny_config("llama", 128, 3, 256), 9);
    // Prompts long and short (3 tokens: the decode strategy), then 6 tokens each, one at a time.
    const std::vector<std::vector<int32_t>> prompts{ids(21, 1), ids(3, 2), ids(40, 3), ids(9, 4)};
    const std::vector<int32_t> follow = ids(6, 5);

    // Alone: each sequence in a cache of its own.
    std::vector<std::vector<float>> alone(prompts.size());
    for (size_t s = 0; s < prompts.size(); ++s) {
        KvCache kv(m.hp.n_layer, 128, m.hp.n_embd_kv());
        const SeqId seq = kv.create_seq();
        alone[s] = test::eval_seq(m.backend, m.pool, kv, seq, prompts[s], false);
        for (const int32_t& t : follow) {
            const auto logits = test::eval_seq(m.backend, m.pool, kv, seq, {&t, 1}, false);
            alone[s].insert(alone[s].end(), logits.begin(), logits.end());
        }
    }

    // Together in one shared pool, staggered: sequence s starts at step s, so prompts and
    // decode tokens of the others share its passes. Also with KV layers spilled to disk.
    auto together = [&](KvCache& kv) {
        std::vector<SeqId> seqs;
        for (size_t s = 0; s < prompts.size(); ++s) seqs.push_back(kv.create_seq());
        std::vector<std::vector<float>> out(prompts.size());
        for (size_t step = 0; step < prompts.size() + follow.size(); ++step) {
            std::vector<SeqTokens> batch;
            std::vector<size_t> who;
            for (size_t s = 0; s < prompts.size(); ++s) {
                if (step < s || step > s + follow.size()) continue;
                const auto tokens = step == s ? std::span(prompts[s]) : std::span(follow).subspan(step - s - 1, 1);
                REQUIRE(kv.reserve(seqs[s], static_cast<int32_t>(tokens.size())));
                batch.push_back({seqs[s], tokens});
                who.push_back(s);
            }
            std::vector<float> logits;
            m.pool.run([&] { m.backend.eval_batch(batch, kv, logits); });
            REQUIRE(logits.size() == who.size() * m.hp.n_vocab);
            for (size_t i = 0; i < who.size(); ++i)
                out[who[i]].insert(out[who[i]].end(), logits.begin() + i * m.hp.n_vocab, logits.begin() + (i + 1) * m.hp.n_vocab);
        }
        return out;
    };
    // A later sequence with the 40-token prompt attaches its two full blocks (read back from
    // the spill file for spilled layers) and computes only the rest.
    auto from_prefix = [&](KvCache& kv) {
        const SeqId seq = kv.create_seq();
        const int32_t attached = kv.attach_prefix(seq, prompts[2]);
        CHECK(attached == 32);
        const SeqTokens rest{seq, std::span(prompts[2]).subspan(attached)};
        REQUIRE(kv.reserve(seq, static_cast<int32_t>(rest.tokens.size())));
        std::vector<float> logits;
        m.pool.run([&] { m.backend.eval_batch({&rest, 1}, kv, logits); });
        return logits == std::vector<float>(alone[2].begin(), alone[2].begin() + m.hp.n_vocab);
    };
    KvCache kv(m.hp.n_layer, 128, m.hp.n_embd_kv(), 64);
    CHECK(together(kv) == alone);
    CHECK(from_prefix(kv));
    KvSpillOptions spill;
    spill.n_resident_layers = 1;
    spill.dir = test::temp_path("batch_spill");
    KvCache spilled(m.hp.n_layer, 128, m.hp.n_embd_kv(), spill, 64);
    CHECK(together(spilled) == alone);
    CHECK(from_prefix(spilled));

    // Reserving is the caller's job: a pass over positions without blocks is refused.
    const SeqId extra = kv.create_seq();
    std::vector<float> logits;
    const std::vector<int32_t> one{5};
    const SeqTokens unreserved{extra, one};
    CHECK_THROWS_AS(m.pool.run([&] { m.backend.eval_batch({&unreserved, 1}, kv, logits); }), UsageError);
}

namespace {
struct Outcome {
    std::mutex mu;
    std::vector<GenerateResult> results;  // in on_done order
    std::vector<uint64_t> order;
};

Request request(std::vector<int32_t> prompt, int n_predict, Outcome* out, uint64_t tag) {
    Request r;
    r.prompt = std::move(prompt);
    r.params = test::greedy(n_predict, true);
    r.on_done = [out, tag](const GenerateResult& g) {
        std::lock_guard lock(out->mu);
        out->results.push_back(g);
        out->order.push_back(tag);
    };
    return r;
}

std::vector<int32_t> encode(Engine& e, const std::string& text) {
    return e.tokenizer().encode(text, e.tokenizer().add_bos_default(), false);
}
}  // namespace

TEST_CASE("scheduler: greedy requests batched give the tokens of each alone, prefixes reused", "[unit][scheduler]") {
    const std::filesystem::path path = test::tiny_llama_path();
    const std::string shared = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her";
    const std::vector<std::string> texts{shared + " dog.",  "Tom had a red ball",         "The sun",
                                         shared + " friends, Ben and Sue, every day.", "One day, a big bird flew", "Mia"};
    std::vector<std::vector<int32_t>> want;
    {
        Engine alone(test::engine_options(path, 256));
        for (const auto& t : texts) want.push_back(test::generate(alone, encode(alone, t), test::greedy(20, true)).tokens);
    }
    Engine engine(test::engine_options(path, 256));
    Outcome out;
    {
        Scheduler sched(engine, {3, 16});
        for (size_t i = 0; i < texts.size(); ++i) {
            // The second long prompt comes after the first has finished, so its prefix is cached.
            if (i == 3) sched.wait_idle();
            sched.submit(request(encode(engine, texts[i]), 20, &out, i));
        }
        sched.wait_idle();
        const SchedulerStats st = sched.stats();
        CHECK(st.requests_done == texts.size());
        CHECK(st.running == 0);
        CHECK(st.generated_tokens == 20 * texts.size());
        CHECK(st.cached_tokens >= 16);
    }
    REQUIRE(out.results.size() == texts.size());
    for (size_t k = 0; k < out.results.size(); ++k) {
        const uint64_t i = out.order[k];
        INFO("prompt " << i << ": " << texts[i]);
        CHECK(out.results[k].tokens == want[i]);
        CHECK(out.results[k].stop_reason == "length");
        if (i == 3) CHECK(out.results[k].cached_tokens >= 16);
        if (i < 3) CHECK(out.results[k].cached_tokens == 0);
    }
    CHECK(engine.kv().pool().n_used() == 0);  // every sequence gave its blocks back
}

TEST_CASE("scheduler: admission, queue limit and cancellation", "[unit][scheduler]") {
    const std::filesystem::path path = test::tiny_llama_path();
    EngineOptions eo;
    eo.model = path;
    eo.n_ctx = 256;
    eo.kv_positions = 64;  // 4 blocks
    Engine engine(eo);
    const auto prompt = encode(engine, "Tom had a red ball");
    const int32_t used_before = engine.kv().pool().n_used();

    SECTION("a request larger than the whole KV cache is refused at submit") {
        Scheduler sched(engine, {2, 4});
        Outcome out;
        CHECK_THROWS_WITH(sched.submit(request(prompt, 60, &out, 0)), Catch::Contains("KV blocks"));
        CHECK_THROWS_AS(sched.submit(request({}, 1, &out, 0)), UsageError);
        Request bad = request(prompt, 4, &out, 0);
        bad.params.sampler.temperature = std::nanf("");
        CHECK_THROWS_WITH(sched.check(bad), Catch::Contains("temperature"));
        CHECK_THROWS_WITH(sched.submit(std::move(bad)), Catch::Contains("temperature"));
        CHECK(sched.check(request(prompt, 4, &out, 0)) == static_cast<int64_t>(prompt.size()) + 4);
        CHECK(out.results.empty());  // nothing refused ran
    }
    SECTION("a request whose prompt does not fit now waits for the blocks of a running one") {
        Scheduler sched(engine, {2, 4});
        Outcome out;
        auto a = encode(engine, "Once upon a time, there was a little girl named Lily. She loved to play in the big green park "
                                "with her dog, Max. One day, they found a shiny red ball under a tall tree.");
        REQUIRE(a.size() >= 40);
        a.resize(40);
        auto b = a;
        b[1] = b[1] == 7 ? 8 : 7;  // nothing in common with a's blocks
        REQUIRE(KvCache::blocks_for(a.size() + 1) == 3);
        sched.submit(request(a, 64 - static_cast<int>(a.size()), &out, 0));  // 3 blocks, 4 at the end
        sched.submit(request(b, 4, &out, 1));                                 // 3 blocks: only after a
        sched.wait_idle();
        REQUIRE(out.results.size() == 2);
        CHECK(out.order == std::vector<uint64_t>{0, 1});
        CHECK(out.results[1].cached_tokens == 0);
    }
    SECTION("sequences that outgrow the cache: the youngest waits again and resumes with the same tokens") {
        const auto want = test::generate(engine, prompt, test::greedy(50, true)).tokens;
        Scheduler sched(engine, {2, 4});
        Outcome out;
        sched.submit(request(prompt, 50, &out, 0));  // 4 blocks each at the end, 4 in all
        sched.submit(request(prompt, 50, &out, 1));
        sched.wait_idle();
        REQUIRE(out.results.size() == 2);
        CHECK(out.order == std::vector<uint64_t>{0, 1});
        CHECK(out.results[0].tokens == want);
        CHECK(out.results[1].tokens == want);
        CHECK(engine.kv().pool().n_used() == used_before);
    }
    SECTION("a full queue refuses, cancel frees queued and running requests") {
        Scheduler sched(engine, {1, 1});
        Outcome out;
        std::promise<void> started;
        bool once = false;
        Request first = request(prompt, 40, &out, 0);
        first.on_text = [&](std::string_view) {
            if (!once) started.set_value();
            once = true;
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
            return true;
        };
        const uint64_t a = sched.submit(std::move(first));
        started.get_future().wait();  // running
        const uint64_t b = sched.submit(request(prompt, 10, &out, 1));  // queued: one may wait
        CHECK_THROWS_AS(sched.submit(request(prompt, 10, &out, 2)), QueueFull);
        sched.cancel(b);
        sched.cancel(a);
        sched.cancel(12345);  // unknown: ignored
        sched.wait_idle();
        REQUIRE(out.results.size() == 2);
        for (const auto& r : out.results) CHECK(r.stop_reason == "cancelled");
        for (size_t k = 0; k < 2; ++k)
            if (out.order[k] == 0) CHECK(out.results[k].tokens.size() < 40);
        CHECK(engine.kv().pool().n_used() == used_before);
        CHECK(sched.stats().requests_done == 2);
    }
    SECTION("on_text returning false cancels; drain refuses new requests") {
        Scheduler sched(engine, {2, 4});
        Outcome out;
        Request r = request(prompt, 40, &out, 0);
        int pieces = 0;
        r.on_text = [&](std::string_view) { return ++pieces < 3; };
        sched.submit(std::move(r));
        sched.drain();
        REQUIRE(out.results.size() == 1);
        CHECK(out.results[0].stop_reason == "cancelled");
        CHECK(pieces == 3);
        CHECK_THROWS_AS(sched.submit(request(prompt, 5, &out, 1)), QueueFull);
        CHECK(engine.kv().pool().n_used() == used_before);
    }
}

TEST_CASE("scheduler: choices of one prompt share its KV blocks; seeded ones repeat", "[unit][scheduler]") {
    const std::filesystem::path path = test::tiny_llama_path();
    Engine engine(test::engine_options(path, 256));
    const auto prompt = encode(engine, "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her dog.");
    REQUIRE(prompt.size() > 32);
    auto sampled = [&](uint64_t seed) {
        Request r = request(prompt, 12, nullptr, 0);
        r.params.sampler = SamplerParams{};
        r.params.sampler.temperature = 1.0f;
        r.params.sampler.seed = seed;
        return r;
    };
    auto run = [&] {
        Outcome out;
        Scheduler sched(engine, {4, 16});
        uint64_t first = 0;
        for (uint64_t i = 0; i < 3; ++i) {
            Request r = sampled(100 + i);
            r.on_done = [&out, i](const GenerateResult& g) {
                std::lock_guard lock(out.mu);
                out.results.push_back(g);
                out.order.push_back(i);
            };
            r.after_prefill_of = first;
            const uint64_t id = sched.submit(std::move(r));
            if (i == 0) first = id;
        }
        sched.wait_idle();
        std::vector<GenerateResult> by_choice(3);
        for (size_t k = 0; k < 3; ++k) by_choice[out.order[k]] = out.results[k];
        return by_choice;
    };
    const std::vector<GenerateResult> a = run();
    // The later choices found every whole block of the prompt cached by the first.
    const int whole_blocks = static_cast<int>((prompt.size() - 1) / KvCache::kBlockSize * KvCache::kBlockSize);
    CHECK(a[1].cached_tokens == whole_blocks);
    CHECK(a[2].cached_tokens == whole_blocks);
    CHECK(a[0].tokens != a[1].tokens);  // different seeds
    // Again, with the prompt's blocks still cached: the same seeds give the same tokens.
    const std::vector<GenerateResult> b = run();
    for (size_t i = 0; i < 3; ++i) CHECK(a[i].tokens == b[i].tokens);
    CHECK(engine.kv().pool().n_used() == 0);
}

TEST_CASE("scheduler: log-probabilities of each generated token come before its text", "[unit][scheduler]") {
    const std::filesystem::path path = test::tiny_llama_path();
    Engine engine(test::engine_options(path, 256));
    const auto prompt = encode(engine, "Once upon a time");
    Outcome out;
    std::vector<SampledLogprobs> streamed;
    {
        Scheduler sched(engine, {2, 4});
        Request r = request(prompt, 10, &out, 0);
        r.params.n_logprobs = 3;
        r.on_logprobs = [&](const SampledLogprobs& lp) { streamed.push_back(lp); };
        sched.submit(std::move(r));
        sched.wait_idle();
    }
    const GenerateResult& g = out.results.at(0);
    REQUIRE(g.logprobs.size() == g.tokens.size());
    REQUIRE(streamed.size() == g.tokens.size());
    for (size_t i = 0; i < g.tokens.size(); ++i) {
        CHECK(g.logprobs[i].chosen.token == g.tokens[i]);
        CHECK(streamed[i].chosen.logprob == g.logprobs[i].chosen.logprob);
        REQUIRE(g.logprobs[i].top.size() == 3);
        // Greedy: the chosen token is the most likely one, its log-probability at most 0.
        CHECK(g.logprobs[i].top[0].token == g.tokens[i]);
        CHECK(g.logprobs[i].chosen.logprob <= 0.0f);
        CHECK(g.logprobs[i].top[1].logprob <= g.logprobs[i].top[0].logprob);
    }
}

TEST_CASE("scheduler: a request that only scores its prompt may fill the context, one that generates may not",
          "[unit][scheduler]") {
    // Perplexity's chunk of --ctx tokens, as llama.cpp's: the context a long-context model's
    // rope is chosen by is the chunk's own.
    const auto prompt = ids(32, 3);
    const auto scored = [&](int n_ctx) {
        EngineOptions eo;
        eo.model = test::tiny_llama_path();
        eo.n_ctx = n_ctx;
        Engine engine(eo);
        const auto n_vocab = static_cast<size_t>(engine.hparams().n_vocab);
        Scheduler sched(engine, {1, 1});
        Outcome out;
        std::vector<float> logits(prompt.size() * n_vocab, std::nanf(""));
        Request r = request(prompt, 0, &out, 0);
        r.on_prompt_logits = [&](size_t first, std::span<const float> rows) {
            std::copy(rows.begin(), rows.end(), logits.begin() + static_cast<std::ptrdiff_t>(first * n_vocab));
        };
        if (n_ctx == static_cast<int>(prompt.size()))
            CHECK_THROWS_WITH(sched.check(request(prompt, 1, &out, 1)), Catch::Contains("no room is left to generate"));
        sched.submit(std::move(r));
        sched.wait_idle();
        REQUIRE(out.results.size() == 1);
        CHECK(out.results[0].error.empty());
        return logits;
    };
    const std::vector<float> filled = scored(32);
    CHECK(std::none_of(filled.begin(), filled.end(), [](float x) { return std::isnan(x); }));  // every row scored
    CHECK(filled == scored(64));  // the rows it gets with room to spare
}
