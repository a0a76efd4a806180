// Speculative decoding in the scheduler: the tokens of plain decoding exactly (greedy), on the
// CPU, the simulated device and CUDA (where there is a GPU), alone and batched, on text that
// repeats its prompt, answers from it, or is free; and sampling's distribution unchanged.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>

#include "core/error.h"
#include "runtime/scheduler.h"
#include "runtime/spec/lookup_drafter.h"
#include "runtime/spec/self_drafter.h"
#include "tests/support/engine_options.h"
#include "tests/support/gguf_writer.h"
#include "tests/support/generate.h"
#include "tests/support/greedy.h"
#include "tests/support/chi_square.h"
#include "tests/support/device_plans.h"
#include "tests/support/model_paths.h"
#include "tests/unit/gpu/cuda_test_support.h"

using namespace strata;
using namespace strata::runtime;

namespace {
const std::vector<std::string>& tasks() {
    static const std::vector<std::string> t{
        // Rewrite a given text with a small edit.
        "Lily had a big red ball. She liked to play with the ball in the park. One day the ball went into the pond. "
        "Lily was sad. Now say it again with a blue ball: Lily had a big blue ball. She liked to",
        // Answer from a given document.
        "Tom lives in a small house near the sea. He has a dog named Max and a cat named Sam. Max likes to run on the "
        "beach. Who is Max? Max is",
        // Free story.
        "Once upon a time",
    };
    return t;
}

std::vector<int32_t> encode(Engine& e, const std::string& text) {
    return e.tokenizer().encode(text, e.tokenizer().add_bos_default(), false);
}

SpecOptions spec(SpecMode mode) {
    SpecOptions o;
    o.mode = mode;
    return o;
}

// Every task's 40 greedy tokens, submitted together to `sched`.
std::vector<GenerateResult> all_tasks_at_once(Engine& engine, Scheduler& sched) {
    std::vector<GenerateResult> got(tasks().size());
    for (size_t i = 0; i < tasks().size(); ++i) {
        Request r;
        r.prompt = encode(engine, tasks()[i]);
        r.params = test::greedy(40, true);
        r.on_done = [&got, i](const GenerateResult& res) { got[i] = res; };
        sched.submit(std::move(r));
    }
    sched.wait_idle();
    return got;
}

EngineOptions sim_options() {
    EngineOptions o = test::engine_options(test::tiny_llama_path(), 512);
    o.gpu.device = DeviceKind::Sim;
    o.gpu.gpu_mem = uint64_t{256} << 20;
    o.gpu.sim_link_gbps = 50;
    return o;
}

// The simulated device with every layer's weights copied in each pass over a slow link: a pass
// costs its copies whatever its rows (the offload that speculation is for), so drafting with the
// model itself on the CPU pays by a wide margin however loaded the machine is.
EngineOptions copied_in_target() {
    EngineOptions o = sim_options();
    o.gpu.sim_link_gbps = 0.05;
    planner::Plan p = test::all_on_device(test::plan_of(o));
    for (auto& l : p.layers) l.weights = planner::WeightOption::DramToGpu;
    o.plan = p;
    return o;
}
}  // namespace

TEST_CASE("speculation: greedy tokens identical to plain decoding on every task, CPU and simulated device", "[unit][spec]") {
    for (const bool sim : {false, true}) {
        Engine engine(sim ? sim_options() : test::engine_options(test::tiny_llama_path(), 512));
        int accepted = 0;
        for (size_t t = 0; t < tasks().size(); ++t) {
            INFO((sim ? "sim" : "cpu") << ", task " << t);
            const auto prompt = encode(engine, tasks()[t]);
            const GenerateResult plain = test::generate(engine, prompt, test::greedy(60, true), spec(SpecMode::Off));
            CHECK(plain.n_drafted == 0);
            for (SpecMode mode : {SpecMode::Lookup, SpecMode::Auto}) {
                const GenerateResult fast = test::generate(engine, prompt, test::greedy(60, true), spec(mode));
                CHECK(fast.tokens == plain.tokens);
                CHECK(fast.n_decode_evals + fast.n_accepted == plain.n_decode_evals);
                if (mode == SpecMode::Lookup) accepted += fast.n_accepted;
            }
        }
        CHECK(accepted > 20);  // the drafts were verified and kept, not just skipped
        CHECK(engine.kv().pool().n_used() == 0);
    }
}

TEST_CASE("speculation: a draft model's guesses keep the plain greedy tokens, alone and batched", "[unit][spec]") {
    Engine engine(copied_in_target());
    // The model drafting for itself: its guesses are the tokens, so nearly every one is kept.
    Engine draft(test::engine_options(test::tiny_llama_path(), 512));
    SpecOptions so = spec(SpecMode::Draft);
    so.draft_model = &draft;
    std::vector<std::vector<int32_t>> want;
    for (size_t t = 0; t < tasks().size(); ++t) {
        const auto prompt = encode(engine, tasks()[t]);
        want.push_back(test::generate(engine, prompt, test::greedy(40, true), spec(SpecMode::Off)).tokens);
        const GenerateResult fast = test::generate(engine, prompt, test::greedy(40, true), so);
        CHECK(fast.tokens == want.back());
        CHECK(fast.n_accepted > 0);
    }
    SchedulerOptions batched{3, 8};
    batched.spec = so;
    Scheduler sched(engine, batched);
    const auto got = all_tasks_at_once(engine, sched);
    for (size_t i = 0; i < got.size(); ++i) CHECK(got[i].tokens == want[i]);
    CHECK_THROWS_AS(Scheduler(engine, SchedulerOptions{1, 1, 1, 0, spec(SpecMode::Draft)}), UsageError);
}

namespace {
// Lookup's tree drafts (width 4) and chains (width 1) on `engine` give plain decoding's greedy
// tokens, alone and batched.
void trees_keep_greedy_tokens(Engine& engine) {
    // Last words that came before with several endings: lookup drafts branch.
    const std::vector<std::string> texts{
        "Lily had a big red ball. Lily had a big blue ball. Lily had a big green hat. Lily had a big",
        "Tom saw a dog. Tom saw a cat. Tom saw a bird in the tree. Tom saw a",
    };
    LookupDrafter lookup;
    DraftTree tree;
    std::vector<std::vector<int32_t>> want;
    for (const auto& text : texts) {
        const auto prompt = encode(engine, text);
        lookup.draft_tree(prompt, 8, 32, 4, tree);
        CHECK(std::count(tree.parent.begin(), tree.parent.end(), -1) >= 2);  // the drafts branch
        want.push_back(test::generate(engine, prompt, test::greedy(50, true), spec(SpecMode::Off)).tokens);
        for (const int32_t width : {1, 4}) {
            SpecOptions so = spec(SpecMode::Lookup);
            so.max_width = width;
            const GenerateResult fast = test::generate(engine, prompt, test::greedy(50, true), so);
            INFO("width " << width << ": " << fast.n_drafted << " drafted, " << fast.tokens.size() << " tokens");
            CHECK(fast.tokens == want.back());
            CHECK(fast.n_accepted > 0);
        }
    }
    SchedulerOptions batched{2, 8};
    batched.spec = spec(SpecMode::Lookup);
    Scheduler sched(engine, batched);
    std::vector<GenerateResult> got(texts.size());
    for (size_t i = 0; i < texts.size(); ++i) {
        Request r;
        r.prompt = encode(engine, texts[i]);
        r.params = test::greedy(50, true);
        r.on_done = [&got, i](const GenerateResult& res) { got[i] = res; };
        sched.submit(std::move(r));
    }
    sched.wait_idle();
    for (size_t i = 0; i < got.size(); ++i) CHECK(got[i].tokens == want[i]);
    CHECK(engine.kv().pool().n_used() == 0);
}
}  // namespace

TEST_CASE("speculation: tree drafts keep the plain greedy tokens, alone and batched", "[unit][spec]") {
    Engine engine(test::engine_options(test::tiny_llama_path(), 512));
    trees_keep_greedy_tokens(engine);
}

TEST_CASE("speculation: tree drafts keep the plain greedy tokens with KV layers spilled to disk", "[unit][spec]") {
    // stories260K at 4096 positions: its KV cache (10 MiB) does not fit 12 MiB beside the rest.
    EngineOptions o = test::engine_options(test::tiny_llama_path(), 4096);
    o.dram_budget = uint64_t{12} << 20;
    o.decode_rows = 1 + SpecOptions{}.max_depth;  // the budget holds the drafts' logits, as the commands' engines do
    o.kv_spill_dir = test::temp_path("spec_tree_spill");
    Engine engine(o);
    REQUIRE(engine.kv().n_spilled() > 0);
    REQUIRE(engine.verifies_trees());
    trees_keep_greedy_tokens(engine);
}

TEST_CASE("speculation: the simulated device verifies tree drafts, KV on it or in DRAM, layers on the CPU too", "[unit][spec]") {
    EngineOptions o = sim_options();
    o.gpu.attention = AttentionChoice::Gpu;
    const planner::Plan made = test::plan_of(o);
    for (const int run : {0, 1, 2}) {
        INFO((run == 0 ? "KV on the device" : run == 1 ? "KV in DRAM, the CPU attending" : "layers copied, streamed and on the CPU"));
        EngineOptions d = o;
        d.plan = run == 2 ? test::heterogeneous(made, false) : test::all_on_device(made);
        d.gpu.attention = run == 1 ? AttentionChoice::Cpu : AttentionChoice::Gpu;
        Engine engine(d);
        REQUIRE(engine.backend_name() == "sim");
        REQUIRE(engine.verifies_trees());
        trees_keep_greedy_tokens(engine);
    }
}

TEST_CASE("speculation: CUDA verifies tree drafts and chains with plain decoding's greedy tokens, KV on it or copied in",
          "[gpu][spec]") {
    STRATA_REQUIRE_CUDA_GPU();
    EngineOptions o = test::engine_options(test::tiny_llama_path(), 512);
    o.gpu.device = DeviceKind::Cuda;
    o.gpu.gpu_mem = uint64_t{256} << 20;
    o.gpu.attention = AttentionChoice::Gpu;
    const planner::Plan made = test::plan_of(o);
    for (const bool copied_in : {false, true}) {
        INFO((copied_in ? "layers copied, streamed and on the CPU" : "KV on the device"));
        EngineOptions d = o;
        d.plan = copied_in ? test::heterogeneous(made, false) : test::all_on_device(made);
        Engine engine(d);
        REQUIRE(engine.backend_name() != "cpu");
        REQUIRE(engine.verifies_trees());
        trees_keep_greedy_tokens(engine);
    }
}

// Self drafts keep every task's plain greedy tokens, alone and in a batch, on `engine`;
// `copied_in`: every layer is copied in over a slow link, where drafting certainly pays.
// Returns each task's greedy tokens.
std::vector<std::vector<int32_t>> self_drafts_keep_greedy_tokens(Engine& engine, const SpecOptions& so, bool copied_in) {
    int drafted = 0;
    std::vector<std::vector<int32_t>> want;
    for (size_t t = 0; t < tasks().size(); ++t) {
        INFO("task " << t);
        const auto prompt = encode(engine, tasks()[t]);
        const GenerateResult plain = test::generate(engine, prompt, test::greedy(40, true), spec(SpecMode::Off));
        want.push_back(plain.tokens);
        const GenerateResult fast = test::generate(engine, prompt, test::greedy(40, true), so);
        CHECK(fast.tokens == plain.tokens);
        CHECK(fast.n_decode_evals + fast.n_accepted == plain.n_decode_evals);
        drafted += fast.n_drafted;
    }
    // Resident on the CPU a pass is cheap and the drafter may rightly turn itself off; a pass
    // that copies every layer in over a slow link makes drafting on the CPU pay, so drafts
    // are certainly verified there.
    if (copied_in) CHECK(drafted > 0);
    SchedulerOptions batched{3, 8};
    batched.spec = so;
    Scheduler sched(engine, batched);
    const auto got = all_tasks_at_once(engine, sched);
    for (size_t i = 0; i < got.size(); ++i) CHECK(got[i].tokens == want[i]);
    CHECK(so.draft_model->kv().pool().n_used() == 0);  // each request's draft sequence freed with it
    return want;
}

TEST_CASE("speculation: self drafts keep the plain greedy tokens on every task, CPU and simulated device", "[unit][spec]") {
    // stories260K (5 layers: its first one or two draft, and seldom guess right) on the CPU and
    // the simulated device.
    for (const bool copied_in : {false, true}) {
        INFO((copied_in ? "simulated device, layers copied in" : "CPU"));
        Engine engine(copied_in ? copied_in_target() : test::engine_options(test::tiny_llama_path(), 512));
        const auto early = open_early_layers(engine);
        SpecOptions so = spec(SpecMode::Self);
        so.draft_model = early.get();
        self_drafts_keep_greedy_tokens(engine, so, copied_in);
    }
    Engine plain(test::engine_options(test::tiny_llama_path(), 64));
    CHECK_THROWS_AS(Scheduler(plain, SchedulerOptions{1, 1, 1, 0, spec(SpecMode::Self)}), UsageError);
}

TEST_CASE("speculation: SmolLM2's early layers draft for it and keep its greedy tokens", "[model][spec]") {
    // 30 layers on the CPU, where the early layers' guesses are kept.
    const auto smollm2 = test::default_model_path();
    STRATA_REQUIRE_MODEL(smollm2, "the default SmolLM2 model (run scripts/fetch_model.sh)");
    Engine engine(test::engine_options(*smollm2, 512));
    const auto early = open_early_layers(engine);
    SpecOptions so = spec(SpecMode::Self);
    so.draft_model = early.get();
    const auto want = self_drafts_keep_greedy_tokens(engine, so, false);
    // The early layers' greedy guess against the model's next token along its own text: the
    // acceptance a draft's first token meets, reported (the scheduler drafts on a resident model
    // only while it pays, which on this CPU is seldom).
    SelfDrafter d(*early, engine.hparams().n_layer, 1);
    for (size_t t = 0; t < tasks().size(); ++t) {
        std::vector<int32_t> context = encode(engine, tasks()[t]), guess;
        int kept = 0;
        for (const int32_t next : want[t]) {
            d.draft(context, 1, guess);
            REQUIRE(guess.size() == 1);
            kept += guess[0] == next;
            d.accepted(guess[0] == next ? 1 : 0);
            context.push_back(next);
        }
        WARN("SmolLM2, task " << t << ": the early layers guessed " << kept << " of " << want[t].size()
                              << " next tokens, the last guesses exiting after " << d.exit_layers() << " layers");
        if (t == 0) CHECK(kept > 0);
    }
}

TEST_CASE("speculation: batched requests each keep their plain greedy tokens", "[unit][spec]") {
    Engine engine(test::engine_options(test::tiny_llama_path(), 512));
    std::vector<std::vector<int32_t>> want;
    for (const auto& t : tasks()) want.push_back(test::generate(engine, encode(engine, t), test::greedy(40, true), spec(SpecMode::Off)).tokens);
    SchedulerOptions so{3, 8};
    so.spec = spec(SpecMode::Lookup);
    Scheduler sched(engine, so);
    const auto got = all_tasks_at_once(engine, sched);
    for (size_t i = 0; i < got.size(); ++i) CHECK(got[i].tokens == want[i]);
    const SchedulerStats st = sched.stats();
    CHECK(st.accepted_tokens > 0);
    CHECK(st.decode_passes + st.accepted_tokens == st.generated_tokens - tasks().size());
}

TEST_CASE("speculation: sampled tokens keep plain sampling's distribution (chi-square), chains and trees", "[unit][spec]") {
    Engine engine(test::engine_options(test::tiny_llama_path(), 256));
    // The prompts repeat themselves, so that drafts follow their end and the rejection step
    // decides the second token often, both ways; the second's last words came before with two
    // endings, so that its drafts branch there and the step tries two children in turn.
    struct Case {
        std::string prompt;
        int32_t width;
    };
    const std::vector<Case> cases{{"Lily had a big red ball. She liked to play with the ball. Lily had a big red", 1},
                                  {"Lily had a big red ball. Lily had a big blue ball. Lily had a", 4}};
    GenerateParams gp;
    gp.n_predict = 6;  // room for four drafts at the second token: both branches of the tree
    gp.ignore_eos = true;
    gp.sampler.temperature = 1.5f;
    gp.sampler.top_k = 0;
    gp.sampler.top_p = 1.0f;
    gp.sampler.min_p = 0.0f;
    const size_t V = size_t(engine.hparams().n_vocab);
    for (const Case& c : cases) {
        INFO("prompt '" << c.prompt << "', width " << c.width);
        const auto prompt = encode(engine, c.prompt);
        SpecOptions so = spec(SpecMode::Lookup);
        so.max_width = c.width;
        // The second token's exact distribution after the prompt and each first token: the
        // model's softmax at that temperature.
        std::map<int32_t, std::vector<double>> after;
        auto distribution = [&](int32_t first) -> const std::vector<double>& {
            auto& p = after[first];
            if (!p.empty()) return p;
            std::vector<int32_t> text = prompt;
            text.push_back(first);
            const auto logits = test::prompt_logits(engine, text);
            p.resize(V);
            double sum = 0;
            for (size_t t = 0; t < V; ++t) sum += (p[t] = std::exp(double(logits[(text.size() - 1) * V + t]) / gp.sampler.temperature));
            for (double& x : p) x /= sum;
            return p;
        };
        const int n = 1500;
        std::vector<double> seen(V), expected(V);
        // Where the rejection step errs, first: how often the second token is each of the
        // draft's children at the first place (in the order tried), or none of them.
        std::vector<double> hits(c.width + 1), expected_hits(c.width + 1);
        LookupDrafter lookup;
        std::vector<int32_t> context;
        DraftTree guess;
        int drafted = 0, branched = 0;
        for (int i = 0; i < n; ++i) {
            gp.sampler.seed = uint64_t(i) + 1;
            const GenerateResult r = test::generate(engine, prompt, gp, so);
            REQUIRE(r.tokens.size() == 6);
            drafted += r.n_drafted;
            ++seen[size_t(r.tokens[1])];
            const auto& p = distribution(r.tokens[0]);
            for (size_t t = 0; t < V; ++t) expected[t] += p[t];
            context = prompt;
            context.push_back(r.tokens[0]);
            lookup.draft_tree(context, 1, 8, c.width, guess);
            if (guess.empty()) continue;
            branched += guess.size() > 1;
            double rest = 1;
            size_t k = 0;
            for (; k < guess.size(); ++k) {
                const double pk = p[size_t(guess.tokens[k])];
                expected_hits[k] += pk, rest -= pk;
                if (r.tokens[1] == guess.tokens[k]) ++hits[k];
            }
            expected_hits[size_t(c.width)] += rest;
            if (std::find(guess.tokens.begin(), guess.tokens.end(), r.tokens[1]) == guess.tokens.end()) ++hits[size_t(c.width)];
        }
        CHECK(drafted > n / 2);
        if (c.width > 1) CHECK(branched > n / 10);  // the step tried two children often
        // Drawn with plain decoding's uniforms: the same seed gives the same tokens without drafts.
        CHECK(test::generate(engine, prompt, gp, spec(SpecMode::Off)).tokens == test::generate(engine, prompt, gp, so).tokens);
        const auto h = test::chi_square(hits, expected_hits);
        INFO("the drafts drawn " << hits[0] << ", " << hits[1] << " times where " << expected_hits[0] << ", " << expected_hits[1]
                                 << " were expected: chi-square " << h.stat);
        CHECK(h.stat < h.bound());
        const auto x = test::chi_square(seen, expected);
        INFO("chi-square " << x.stat << " on " << x.df << " degrees of freedom");
        CHECK(x.df >= 5);
        CHECK(x.stat < x.bound());
    }
}
