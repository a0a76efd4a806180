// The scheduler shares its batch and queue between clients: a light client's request runs
// within a bounded number of steps while a heavy client floods it, the heavy one holds at most
// its share of the batch meanwhile, a much lighter client's steps carry its sequences alone
// while the others' sit out at most a bounded number of steps, each client waits at most its
// share of the queue, and a client alone uses the whole batch as before; and the rules of
// ClientShares behind that.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <future>
#include <limits>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cpu/matmul.h"
#include "runtime/client_shares.h"
#include "runtime/scheduler.h"
#include "tests/support/engine_options.h"
#include "tests/support/greedy.h"
#include "tests/support/model_paths.h"

using namespace strata;
using namespace strata::runtime;

namespace {

// Every generated token, in the order the scheduler produced them: who it was for.
struct TokenLog {
    struct Token {
        std::string client;
        int request;
    };
    std::mutex mu;
    std::vector<Token> tokens;
    int done = 0;

    Request request(const std::vector<int32_t>& prompt, int n_predict, const std::string& client, int tag) {
        Request r;
        r.prompt = prompt;
        r.client = client;
        r.params = test::greedy(n_predict, true);
        r.params.n_logprobs = 0;  // on_logprobs once per token
        r.on_logprobs = [this, client, tag](const SampledLogprobs&) {
            std::lock_guard lock(mu);
            tokens.push_back({client, tag});
        };
        r.on_done = [this](const GenerateResult&) {
            std::lock_guard lock(mu);
            ++done;
        };
        return r;
    }
};

// Opens once the test has submitted what it needs while the first request is running.
struct Gate {
    std::promise<void> running, open;
    std::shared_future<void> opened = open.get_future().share();
    bool first = true;

    // Chains before `r`'s own on_logprobs: its first token waits for the gate.
    void hold(Request& r) {
        r.on_logprobs = [this, inner = r.on_logprobs](const SampledLogprobs& lp) {
            if (first) {
                first = false;
                running.set_value();
                opened.wait();
            }
            inner(lp);
        };
    }
};

// stories260K with KV room for every sequence the tests run at once.
EngineOptions roomy_options(const std::filesystem::path& model) {
    EngineOptions eo = test::engine_options(model, 256);
    eo.kv_positions = 1024;
    return eo;
}

std::vector<int32_t> prompt_of(Engine& e, const std::string& text) {
    return e.tokenizer().encode(text, e.tokenizer().add_bos_default(), false);
}

// The most distinct requests among any `width` consecutive tokens: how many sequences ran together.
size_t widest_batch(const std::vector<TokenLog::Token>& tokens, size_t width) {
    size_t widest = 0;
    for (size_t i = 0; i + width <= tokens.size(); ++i) {
        std::set<int> seen;
        for (size_t k = i; k < i + width; ++k) seen.insert(tokens[k].request);
        widest = std::max(widest, seen.size());
    }
    return widest;
}

struct Requests {
    std::vector<int32_t> prompt;
    int count, n_predict;
};

// The "heavy" client's requests, back to back; once its request `held` runs (it waits for the
// submission at its first token), the "light" client's. Returns the tokens logged before the
// light ones came.
size_t heavy_then_light(Engine& engine, SchedulerOptions opts, TokenLog& log, const Requests& heavy, const Requests& light,
                        int held = 0) {
    Gate gate;
    size_t light_submitted_at = 0;
    opts.spec.mode = SpecMode::Off;  // the log's tokens count steps: one a sequence
    Scheduler sched(engine, opts);
    for (int i = 0; i < heavy.count; ++i) {
        Request r = log.request(heavy.prompt, heavy.n_predict, "heavy", i);
        if (i == held) gate.hold(r);
        sched.submit(std::move(r));
    }
    gate.running.get_future().wait();  // the heavy client runs; the rest of its requests wait
    {
        std::lock_guard lock(log.mu);
        light_submitted_at = log.tokens.size();
    }
    for (int i = 0; i < light.count; ++i) sched.submit(log.request(light.prompt, light.n_predict, "light", 1000 + i));
    gate.open.set_value();
    sched.wait_idle();
    return light_submitted_at;
}

bool is_light(const TokenLog::Token& k) { return k.client == "light"; }

// Where the "light" client's first and last tokens are in the log (it has some).
std::pair<size_t, size_t> light_span(const std::vector<TokenLog::Token>& tokens) {
    const size_t first = std::find_if(tokens.begin(), tokens.end(), is_light) - tokens.begin();
    const size_t last = tokens.size() - 1 - (std::find_if(tokens.rbegin(), tokens.rend(), is_light) - tokens.rbegin());
    return {first, last};
}

}  // namespace

TEST_CASE("scheduler fairness: a light client is served within bounded steps while a heavy one floods", "[unit][scheduler]") {
    const std::filesystem::path path = test::tiny_llama_path();
    Engine engine(roomy_options(path));
    const auto prompt = prompt_of(engine, "Tom had a red ball");
    constexpr int kHeavy = 40, kHeavyTokens = 3, kLightTokens = 10, kBatch = 4;
    const int per_client = GENERATE(0, 1);  // the equal share (kBatch / 2), or one sequence
    const int share = per_client > 0 ? per_client : kBatch / 2;
    INFO("--max-batch-per-client " << per_client);

    TokenLog log;
    const size_t light_submitted_at =
        heavy_then_light(engine, {kBatch, 64, per_client}, log, {prompt, kHeavy, kHeavyTokens}, {prompt, 1, kLightTokens});
    REQUIRE(log.done == kHeavy + 1);
    const auto& t = log.tokens;
    REQUIRE(std::count_if(t.begin(), t.end(), is_light) == kLightTokens);
    const auto [first_light, last_light] = light_span(t);
    // In arrival order it would wait for the 39 queued heavy requests, about (39 x 3) / 4 steps.
    // Here it starts once one of the at most kBatch running heavy requests ends (<= 3 steps)
    // and then shares each step with at most `share` heavy sequences, after the few admitted
    // before it came have ended.
    const size_t heavy_before_start = first_light - light_submitted_at;
    CHECK(heavy_before_start <= static_cast<size_t>(kBatch * kHeavyTokens));
    size_t heavy_while_running = 0;
    for (size_t k = first_light; k <= last_light; ++k) heavy_while_running += !is_light(t[k]);
    CHECK(heavy_while_running <= static_cast<size_t>(share * (kLightTokens - 1) + kBatch * kHeavyTokens));
    // Fewer than in arrival order, where the light request would see none of its own steps
    // before all but the last batch of heavy requests had ended.
    CHECK(first_light < t.size() - kLightTokens - kBatch * kHeavyTokens);
}

TEST_CASE("scheduler fairness: a much lighter client's steps carry its sequences alone, and nobody starves", "[unit][scheduler]") {
    const std::filesystem::path path = test::tiny_llama_path();
    Engine engine(roomy_options(path));
    // The heavy client's long prompts (each request charged its ~100 tokens) keep its service
    // far above the light client's short one for the whole light request: the light one comes
    // once a whole batch of them has run (had it come beside the first alone, that one's
    // service would decay below twice the light one's within the light request).
    std::string story;
    for (int i = 0; i < 12; ++i) story += "Tom had a red ball and a big dog. ";
    const auto long_prompt = prompt_of(engine, story), short_prompt = prompt_of(engine, "Tom had a red ball");
    REQUIRE(long_prompt.size() >= 100);
    REQUIRE(long_prompt.size() + 8 < 256);
    constexpr int kHeavy = 8, kHeavyTokens = 16, kLightTokens = 30, kBatch = 4;
    constexpr int kWait = ClientShares::kMaxWaitSteps;
    const int per_client = GENERATE(0, 1);
    INFO("--max-batch-per-client " << per_client);

    TokenLog log;
    heavy_then_light(engine, {kBatch, 64, per_client}, log, {long_prompt, kHeavy, kHeavyTokens}, {short_prompt, 1, kLightTokens},
                     kBatch - 1);
    REQUIRE(log.done == kHeavy + 1);
    const auto& t = log.tokens;
    REQUIRE(std::count_if(t.begin(), t.end(), is_light) == kLightTokens);
    const auto [first_light, last_light] = light_span(t);
    // The light client has one sequence: one light token per step while it runs.
    size_t heavy_while_running = 0, light_in_a_row = 0, longest_light_run = 0;
    for (size_t k = first_light; k <= last_light; ++k) {
        if (is_light(t[k])) {
            longest_light_run = std::max(longest_light_run, ++light_in_a_row);
        } else {
            ++heavy_while_running;
            light_in_a_row = 0;
        }
    }
    // The light bound: the heavy client runs at most kBatch - 1 sequences beside it (those
    // admitted before it came, while the heavy client was alone, end in their time), and each
    // of their places joins at most one step in kWait + 1 (a request admitted meanwhile waits
    // as well): over kLightTokens steps at most kLightTokens / (kWait + 1) + 1 tokens a place.
    // Sharing every step, the heavy client would have at least one token a step.
    CHECK(heavy_while_running <= static_cast<size_t>((kBatch - 1) * (kLightTokens / (kWait + 1) + 1)));
    // No starvation: the heavy client still runs meanwhile, never left out more than kWait
    // steps in a row; the light tokens of the step its last request ended and of the step
    // its next one joined may come before its own token in those steps.
    CHECK(heavy_while_running > 0);
    CHECK(longest_light_run <= static_cast<size_t>(kWait + 2));
}

TEST_CASE("scheduler fairness: a client alone uses the whole batch and queue", "[unit][scheduler]") {
    const std::filesystem::path path = test::tiny_llama_path();
    Engine engine(roomy_options(path));
    const auto prompt = prompt_of(engine, "Tom had a red ball");
    constexpr int kBatch = 4, kQueue = 8;
    TokenLog log;
    Gate gate;
    {
        Scheduler sched(engine, {kBatch, kQueue, 1, 1});  // shares of one: for clients that share
        for (int i = 0; i < kBatch + kQueue; ++i) {
            Request r = log.request(prompt, 12, "alone", i);
            if (i == 0) gate.hold(r);
            sched.submit(std::move(r));  // no share of the queue to keep to: nobody else waits
        }
        // Refused by the whole queue's bound, not by a client's share of it.
        bool whole_queue = false;
        try {
            sched.submit(log.request(prompt, 1, "alone", 99));
        } catch (const ClientQueueFull&) {
        } catch (const QueueFull&) {
            whole_queue = true;
        }
        CHECK(whole_queue);
        gate.open.set_value();
        sched.wait_idle();
    }
    REQUIRE(log.done == kBatch + kQueue);
    CHECK(widest_batch(log.tokens, kBatch) == kBatch);  // kBatch sequences in one step
}

TEST_CASE("scheduler fairness: each client waits at most its share of the queue while others have work", "[unit][scheduler]") {
    const std::filesystem::path path = test::tiny_llama_path();
    Engine engine(roomy_options(path));
    const auto prompt = prompt_of(engine, "Tom had a red ball");
    TokenLog log;
    Gate gate;
    {
        Scheduler sched(engine, {1, 8});  // a client's share of the queue: 8 / 4 = 2
        Request first = log.request(prompt, 4, "a", 0);
        gate.hold(first);
        sched.submit(std::move(first));
        gate.running.get_future().wait();
        sched.submit(log.request(prompt, 4, "b", 1));
        sched.submit(log.request(prompt, 4, "b", 2));
        CHECK_THROWS_AS(sched.submit(log.request(prompt, 4, "b", 3)), ClientQueueFull);
        sched.submit(log.request(prompt, 4, "a", 4));  // a's share counts only what a has waiting
        sched.submit(log.request(prompt, 4, "a", 5));
        CHECK_THROWS_AS(sched.submit(log.request(prompt, 4, "a", 6)), ClientQueueFull);
        const SchedulerStats st = sched.stats();
        CHECK(st.queued == 4);
        gate.open.set_value();
        sched.wait_idle();
    }
    CHECK(log.done == 5);
}

TEST_CASE("client shares: a step shared with a lighter client's decode stays within the decode strategy's size", "[unit][scheduler]") {
    constexpr int64_t kSmall = cpu::kDecodeTokens;
    // A heavier client's chunk would take a small step past it: it waits.
    CHECK_FALSE(ClientShares::may_join(2, kSmall, 50.0, 10.0));
    // Within it, or into a step already past it, it joins.
    CHECK(ClientShares::may_join(2, kSmall - 2, 50.0, 10.0));
    CHECK(ClientShares::may_join(kSmall + 1, 100, 50.0, 10.0));
    // A client lighter than every decoding one takes the step past it (its prompt does not wait).
    CHECK(ClientShares::may_join(2, 100, 5.0, 10.0));
    // Nobody decoding: nothing to keep small.
    CHECK(ClientShares::may_join(0, 100, 50.0, std::numeric_limits<double>::infinity()));

    // A client alone has the whole batch; sharing, the given share or an equal one (at least 1).
    CHECK(ClientShares::batch_share(8, 1, 1) == 8);
    CHECK(ClientShares::batch_share(8, 1, 3) == 1);
    CHECK(ClientShares::batch_share(8, 20, 2) == 8);
    CHECK(ClientShares::batch_share(8, 0, 3) == 2);
    CHECK(ClientShares::batch_share(8, 0, 20) == 1);
}

TEST_CASE("client shares: the light client is the one served under a share of every other running client", "[unit][scheduler]") {
    ClientShares shares;
    shares.served("light", 10);
    shares.served("heavy", 100);
    shares.served("heavier", 400);
    using V = std::vector<std::string_view>;
    CHECK(shares.light(V{"heavy", "light", "heavier", "light"}) == std::optional<std::string>("light"));
    // Below the share of one other client but not of every other one: nobody is light.
    shares.served("middle", 15);
    CHECK_FALSE(shares.light(V{"heavy", "light", "middle"}).has_value());
    CHECK(shares.light(V{"heavy", "middle"}) == std::optional<std::string>("middle"));
    // Alone, or the only client running (with several sequences): nothing to sit out for.
    CHECK_FALSE(shares.light(V{"light"}).has_value());
    CHECK_FALSE(shares.light(V{"heavy", "heavy"}).has_value());
    CHECK_FALSE(shares.light(V{}).has_value());
    // Just under the share makes it light; at the share it is not.
    shares.served("twice", 20);
    CHECK_FALSE(shares.light(V{"light", "twice"}).has_value());
    shares.served("twice", 1);
    CHECK(shares.light(V{"light", "twice"}) == std::optional<std::string>("light"));
}

TEST_CASE("client shares: service decays, a request counts beyond its tokens, clients with work stay active", "[unit][scheduler]") {
    ClientShares shares;
    shares.accepted("a");
    shares.admitted("a");
    shares.served("b", 4);
    CHECK(shares.service("a") == Approx(static_cast<double>(ClientShares::kRequestTokens)));
    CHECK(shares.active() == 2);
    const std::string a = "a";
    CHECK(shares.active(&a) == 1);
    for (int i = 0; i < ClientShares::kHalfLifeSteps; ++i) shares.end_step();
    CHECK(shares.service("a") == Approx(ClientShares::kRequestTokens / 2.0));
    for (int i = 0; i < 4 * ClientShares::kHalfLifeSteps; ++i) shares.end_step();
    CHECK(shares.service("b") == 0.0);  // forgotten: b no longer counts as sharing
    CHECK(shares.active() == 1);        // a still has a request
    shares.done("a");
    shares.forget();
    CHECK(shares.active() == 0);
}
