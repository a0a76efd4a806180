// A draft tree verified in one pass: each node's logits are, bit for bit, those plain decoding
// gives down its path (the tree mask over the paged KV, each node's ancestors at slots in
// position order); the kept path, moved to its positions, decodes on as plain decoding does;
// on the simulated device (the CPU's kernels) and with KV layers spilled to disk the same bits
// wherever its KV lives.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <tuple>

#include "core/error.h"
#include "runtime/engine.h"
#include "runtime/exec/draft_rows.h"
#include "tests/support/device_plans.h"
#include "tests/support/engine_options.h"
#include "tests/support/gguf_writer.h"
#include "tests/support/model_paths.h"

using namespace strata;
using namespace strata::runtime;

namespace {
// Two branches at the root, three under node 2, a chain under node 5.
const std::vector<int32_t> kParent{-1, 0, 0, 1, 2, 2, 2, 5, 7, 8, 3, 10, 6};

size_t path_depth(const std::vector<int32_t>& tree, int32_t node) {
    size_t d = 0;
    for (; tree[size_t(node)] >= 0; node = tree[size_t(node)]) ++d;
    return d;
}

std::vector<int32_t> path_to(int32_t node) {
    std::vector<int32_t> path;
    for (; node >= 0; node = kParent[size_t(node)]) path.insert(path.begin(), node);
    return path;
}

// The logits of plain decoding after `prompt` then `tokens` one at a time: the last step's row.
std::vector<float> decoded(Engine& e, std::span<const int32_t> prompt, std::span<const int32_t> tokens) {
    const SeqId s = e.create_seq();
    const SeqTokens p{s, prompt};
    auto row = e.eval_batch({&p, 1});
    for (const int32_t t : tokens) {
        const SeqTokens step{s, {&t, 1}};
        row = e.eval_batch({&step, 1});
    }
    std::vector<float> out(row.begin(), row.end());
    e.free_seq(s);
    return out;
}

// A prompt, and a token per tree node taken from it (a plausible text, every id valid).
std::pair<std::vector<int32_t>, std::vector<int32_t>> tree_text(Engine& e) {
    auto prompt = e.tokenizer().encode("Lily had a big red ball. She liked to play with it in the park.", e.tokenizer().add_bos_default(),
                                       false);
    std::vector<int32_t> tokens;
    for (size_t i = 0; i < kParent.size(); ++i) tokens.push_back(prompt[(3 * i + 1) % prompt.size()]);
    return {prompt, tokens};
}

bool same_bits(std::span<const float> a, std::span<const float> b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}
}  // namespace

TEST_CASE("draft rows: a slot a node, each node's ancestors before it, the likeliest path at its positions", "[unit][spec]") {
    // kParent, and a tree deeper than 16 with branches (a 16-slot stride a branch put the first
    // branch's 17th node on the second branch's first).
    std::vector<int32_t> deep{-1};
    for (int32_t i = 1; i <= 24; ++i) deep.push_back(i - 1);       // the first branch: depth 24
    for (int32_t b = 0; b < 3; ++b) deep.push_back(int32_t(b));    // second children of nodes 0, 1, 2
    deep.push_back(int32_t(deep.size()) - 1);                      // and one below the last of them
    for (const auto& tree : {kParent, deep}) {
        const auto slot = draft_slots(tree);
        std::vector<int64_t> sorted = slot;
        std::sort(sorted.begin(), sorted.end());
        std::vector<int64_t> each(tree.size());
        std::iota(each.begin(), each.end(), 0);
        CHECK(sorted == each);  // one slot a node, none left unused
        for (int32_t i = 0; i < int32_t(tree.size()); ++i) {
            std::vector<int32_t> path;
            for (int32_t node = i; node >= 0; node = tree[size_t(node)]) path.insert(path.begin(), node);
            for (size_t d = 1; d < path.size(); ++d) CHECK(slot[size_t(path[d])] > slot[size_t(path[d - 1])]);
        }
        for (const int32_t node : first_child_path(tree, int32_t(tree.size()), 0, int64_t(tree.size())))
            CHECK(slot[size_t(node)] == int64_t(path_depth(tree, node)));
    }
    const auto slot = draft_slots(kParent);
    const DraftRows rows = lay_out_draft(kParent, 21);
    CHECK(rows.span == *std::max_element(slot.begin(), slot.end()) + 1);
    for (int32_t i = 0; i < int32_t(kParent.size()); ++i) {
        const auto path = path_to(i);
        CHECK(rows.pos[size_t(i)] == 21 + int64_t(path.size()) - 1);
        for (int32_t j = 0; j < int32_t(kParent.size()); ++j) {
            const bool ancestor = std::find(path.begin(), path.end(), j) != path.end();
            const uint64_t word = rows.mask[size_t(i) * size_t(rows.words) + size_t(slot[size_t(j)] / 64)];
            CHECK(((word >> (slot[size_t(j)] % 64)) & 1) == uint64_t(ancestor));
        }
    }
    // Each node's first child, from the root or a node below it, at most as many as asked.
    CHECK(first_child_path(kParent, int32_t(kParent.size()), 0, 4) == std::vector<int32_t>{0, 1, 3, 10});
    CHECK(first_child_path(kParent, int32_t(kParent.size()), 2, 8) == std::vector<int32_t>{2, 4});
    CHECK(first_child_path(kParent, int32_t(kParent.size()), 5, 8) == std::vector<int32_t>{5, 7, 8, 9});
    CHECK(first_child_path({}, 6, 1, 3) == std::vector<int32_t>{1, 2, 3});  // a chain
    const std::vector<int32_t> chain{-1, 0, 1, 2};
    CHECK(draft_is_chain(chain));
    CHECK_FALSE(draft_is_chain(kParent));
    CHECK(draft_slots(chain) == std::vector<int64_t>{0, 1, 2, 3});
    CHECK_THROWS_AS(draft_slots(std::vector<int32_t>{0, 0}), UsageError);
    CHECK_THROWS_AS(draft_slots(std::vector<int32_t>{-1, 1}), UsageError);
    CHECK_THROWS_AS(draft_slots(std::vector<int32_t>{-1, -1}), UsageError);
}

TEST_CASE("draft tree: every node's logits are plain decoding's down its path; the kept path decodes on", "[unit][spec]") {
    Engine engine(test::engine_options(test::tiny_llama_path(), 512));
    const auto [prompt, tokens] = tree_text(engine);
    const int64_t V = engine.hparams().n_vocab;

    const SeqId seq = engine.create_seq();
    const SeqTokens p{seq, prompt};
    engine.eval_batch({&p, 1});
    const SeqTokens tree{seq, tokens, PassOutput::Verify, kParent};
    const auto got = engine.eval_batch({&tree, 1});
    const std::vector<float> rows(got.begin(), got.end());
    REQUIRE(rows.size() == kParent.size() * size_t(V));
    CHECK(engine.kv().seq_len(seq) == int32_t(prompt.size()));  // nothing committed until a path is kept
    for (int32_t i = 0; i < int32_t(kParent.size()); ++i) {
        INFO("node " << i);
        std::vector<int32_t> path;
        for (const int32_t n : path_to(i)) path.push_back(tokens[size_t(n)]);
        CHECK(same_bits(std::span(rows).subspan(size_t(i) * size_t(V), size_t(V)), decoded(engine, prompt, path)));
    }

    // Keep the path to node 8 (root, 2, 5, 7, 8): its rows move to their positions.
    const auto kept = path_to(8);
    const auto slot = draft_slots(kParent);
    std::vector<int64_t> from;
    std::vector<int32_t> text;
    for (const int32_t n : kept) from.push_back(slot[size_t(n)]), text.push_back(tokens[size_t(n)]);
    engine.keep_path(seq, from, text);
    CHECK(engine.kv().seq_len(seq) == int32_t(prompt.size() + kept.size()));
    const int32_t after = prompt[0];
    const SeqTokens step{seq, {&after, 1}};
    const auto next = engine.eval_batch({&step, 1});
    text.push_back(after);
    CHECK(same_bits(next, decoded(engine, prompt, text)));
    engine.free_seq(seq);
    CHECK(engine.kv().pool().n_used() == 0);
}

TEST_CASE("draft tree with its head deferred: the likeliest path's rows at once, the others as asked, the same bits", "[unit][spec]") {
    Engine engine(test::engine_options(test::tiny_llama_path(), 512));
    const auto [prompt, tokens] = tree_text(engine);
    const auto V = size_t(engine.hparams().n_vocab);
    auto run_tree = [&](bool defer) {
        const SeqId seq = engine.create_seq();
        const SeqTokens p{seq, prompt};
        engine.eval_batch({&p, 1});
        const SeqTokens tree{seq, tokens, PassOutput::Verify, kParent, defer};
        return std::pair{seq, engine.eval_batch({&tree, 1})};
    };
    const auto [eager_seq, eager_rows] = run_tree(false);
    const std::vector<float> eager(eager_rows.begin(), eager_rows.end());
    engine.free_seq(eager_seq);

    const auto [seq, rows] = run_tree(true);
    // The first child at each node from the root, as many rows as a decode step computes together.
    const std::vector<int32_t> likely{0, 1, 3, 10};
    REQUIRE(int64_t(likely.size()) == Backend::kDecodeRows);
    auto row = [&](std::span<const float> all, size_t i) { return all.subspan(i * V, V); };
    for (size_t i = 0; i < kParent.size(); ++i) {
        INFO("node " << i);
        const bool on = std::find(likely.begin(), likely.end(), int32_t(i)) != likely.end();
        CHECK(engine.deferred(int64_t(i)) == !on);
        if (on) CHECK(same_bits(row(rows, i), row(eager, i)));
        else CHECK(std::all_of(row(rows, i).begin(), row(rows, i).end(), [](float x) { return x == 0.0f; }));
    }
    const std::vector<int64_t> two{2, 8};
    engine.head_deferred(two);
    CHECK_FALSE(engine.deferred(2));
    CHECK(engine.deferred(5));
    std::vector<int64_t> all(kParent.size());
    std::iota(all.begin(), all.end(), 0);
    engine.head_deferred(all);
    for (size_t i = 0; i < kParent.size(); ++i) {
        INFO("node " << i);
        CHECK_FALSE(engine.deferred(int64_t(i)));
        CHECK(same_bits(row(rows, i), row(eager, i)));
    }
    engine.free_seq(seq);
}

namespace {
// The tree's rows of logits after `prompt` on `e`; then the path to node 8 kept and one more
// token decoded: its row appended.
std::vector<float> tree_then_kept_path(Engine& e, std::span<const int32_t> prompt, std::span<const int32_t> tokens) {
    const SeqId seq = e.create_seq();
    const SeqTokens p{seq, prompt};
    e.eval_batch({&p, 1});
    const SeqTokens tree{seq, tokens, PassOutput::Verify, kParent};
    const auto got = e.eval_batch({&tree, 1});
    std::vector<float> rows(got.begin(), got.end());
    const auto slot = draft_slots(kParent);
    std::vector<int64_t> from;
    std::vector<int32_t> text;
    for (const int32_t n : path_to(8)) from.push_back(slot[size_t(n)]), text.push_back(tokens[size_t(n)]);
    e.keep_path(seq, from, text);
    const int32_t after = prompt[0];
    const SeqTokens step{seq, {&after, 1}};
    const auto next = e.eval_batch({&step, 1});
    rows.insert(rows.end(), next.begin(), next.end());
    e.free_seq(seq);
    return rows;
}

// tree_then_kept_path's rows on two engines, bit for bit, row by row (n_vocab values each).
void check_same_rows(std::span<const float> got, std::span<const float> want, int64_t n_vocab) {
    REQUIRE(got.size() == want.size());
    const auto V = size_t(n_vocab);
    for (size_t i = 0; i <= kParent.size(); ++i) {
        INFO((i < kParent.size() ? "node " : "after the kept path, row ") << i);
        CHECK(same_bits(got.subspan(i * V, V), want.subspan(i * V, V)));
    }
}
}  // namespace

TEST_CASE("draft tree with KV layers spilled to disk: the resident cache's logits bit for bit, the kept path decoding on", "[unit][spec]") {
    // stories260K at 4096 positions: its KV cache (10 MiB) does not fit 12 MiB beside the rest.
    EngineOptions o = test::engine_options(test::tiny_llama_path(), 4096);
    Engine resident(o);
    REQUIRE(resident.kv().n_spilled() == 0);
    const auto [prompt, tokens] = tree_text(resident);
    const auto want = tree_then_kept_path(resident, prompt, tokens);
    const int64_t V = resident.hparams().n_vocab;

    o.dram_budget = uint64_t{12} << 20;
    o.kv_spill_dir = test::temp_path("draft_tree_spill");
    Engine spilled(o);
    REQUIRE(spilled.kv().n_spilled() > 0);
    REQUIRE(spilled.kv().n_spilled() < spilled.hparams().n_layer);  // resident layers move at once, spilled ones later
    CHECK(spilled.verifies_trees());
    check_same_rows(tree_then_kept_path(spilled, prompt, tokens), want, V);
    CHECK(spilled.kv().pool().n_used() == 0);

    // The simulated device with the host cache spilled: its blocks copied in, or the CPU attending.
    o.gpu.device = DeviceKind::Sim;
    o.gpu.gpu_mem = uint64_t{256} << 20;
    o.gpu.sim_link_gbps = 50;
    EngineOptions unlimited = o;
    unlimited.dram_budget = 0;  // for the plan's shape only: every layer goes on the device below
    const planner::Plan made = test::plan_of(unlimited);
    for (const bool cpu_attention : {false, true}) {
        INFO((cpu_attention ? "sim, the CPU attending" : "sim, KV copied in"));
        EngineOptions d = o;
        // The weights on the device, the KV cache in DRAM, its last two layers spilled as the plan says.
        d.plan = test::all_on_device(made);
        for (auto& l : d.plan->layers) {
            l.kv = l.layer + 2 < int(d.plan->layers.size()) ? planner::KvOption::Dram : planner::KvOption::Nvme;
            l.attention = cpu_attention ? planner::Device::Cpu : planner::Device::Gpu;
        }
        d.plan->policy.cpu_attention = cpu_attention;
        d.dram_budget = uint64_t{15} << 20;  // the device's staging and load buffers, and the I/O staging, beside the host cache
        d.gpu.attention = cpu_attention ? AttentionChoice::Cpu : AttentionChoice::Gpu;
        Engine sim(d);
        REQUIRE(sim.backend_name() == "sim");
        REQUIRE(sim.kv().n_spilled() > 0);
        CHECK(sim.verifies_trees());
        check_same_rows(tree_then_kept_path(sim, prompt, tokens), want, V);
    }
}

TEST_CASE("draft tree on the simulated device: the CPU backend's logits bit for bit, KV on the device or in DRAM", "[unit][spec]") {
    EngineOptions o = test::engine_options(test::tiny_llama_path(), 512);
    Engine cpu(o);
    const auto [prompt, tokens] = tree_text(cpu);
    const auto want = tree_then_kept_path(cpu, prompt, tokens);
    const int64_t V = cpu.hparams().n_vocab;

    o.gpu.device = DeviceKind::Sim;
    o.gpu.gpu_mem = uint64_t{256} << 20;
    o.gpu.sim_link_gbps = 50;
    o.gpu.attention = AttentionChoice::Gpu;
    const planner::Plan made = test::plan_of(o);
    // Every layer on the device but one computed by the CPU (its KV in DRAM, the others' on the device).
    planner::Plan one_on_cpu = test::all_on_device(made);
    one_on_cpu.layers[1].weights = planner::WeightOption::DramCpu;
    const std::vector<std::tuple<const char*, planner::Plan, AttentionChoice>> runs{
        {"KV on the device", test::all_on_device(made), AttentionChoice::Gpu},
        {"KV on the device, one layer on the CPU", one_on_cpu, AttentionChoice::Gpu},
        {"KV in DRAM, the CPU attending", test::all_on_device(made), AttentionChoice::Cpu},
        {"KV in DRAM copied in, layers copied, streamed and on the CPU", test::heterogeneous(made, false), AttentionChoice::Gpu},
        {"KV in DRAM, the CPU attending, layers copied, streamed and on the CPU", test::heterogeneous(made, true), AttentionChoice::Cpu},
    };
    for (const auto& [what, plan, attention] : runs) {
        INFO(what);
        EngineOptions d = o;
        d.plan = plan;
        d.gpu.attention = attention;
        Engine sim(d);
        REQUIRE(sim.backend_name() == "sim");
        CHECK(sim.verifies_trees());
        check_same_rows(tree_then_kept_path(sim, prompt, tokens), want, V);
        CHECK(sim.kv().pool().n_used() == 0);
    }
}

TEST_CASE("draft tree on the simulated device: refused where layers rebuild their KV, chains verified there", "[unit][spec]") {
    EngineOptions o = test::engine_options(test::tiny_llama_path(), 256);
    o.gpu.device = DeviceKind::Sim;
    o.gpu.gpu_mem = uint64_t{256} << 20;
    o.gpu.attention = AttentionChoice::Gpu;
    o.kv_type = DType::F32;
    planner::Plan rebuilt = test::all_on_device(test::plan_of(o));
    rebuilt.policy.recompute = true;
    for (auto& l : rebuilt.layers)
        if (l.layer % 2 == 1) l.kv = planner::KvOption::ActGpu;
    o.plan = rebuilt;
    Engine engine(o);
    REQUIRE(engine.kv().n_rebuilt() > 0);
    CHECK_FALSE(engine.verifies_trees());
    const SeqId seq = engine.create_seq();
    const std::vector<int32_t> prompt{1, 2, 3}, tokens{4, 5, 6};
    const SeqTokens p{seq, prompt};
    engine.eval_batch({&p, 1});
    const std::vector<int32_t> branching{-1, 0, 0}, chain{-1, 0, 1};
    const SeqTokens tree{seq, tokens, PassOutput::Verify, branching};
    CHECK_THROWS_AS(engine.eval_batch({&tree, 1}), UsageError);
    engine.kv().truncate_seq(seq, 3);
    const SeqTokens line{seq, tokens, PassOutput::Verify, chain};
    CHECK(engine.eval_batch({&line, 1}).size() == 3 * size_t(engine.hparams().n_vocab));
    CHECK(engine.kv().seq_len(seq) == 6);
}
