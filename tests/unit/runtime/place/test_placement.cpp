// The planner drives the weight store: a plan made for a DRAM budget becomes the residency,
// replays from JSON to the same residency, never exceeds the budget, and streamed layers
// give the same logits as resident ones.
#include <catch2/catch.hpp>

#include <optional>

#include "core/error.h"
#include "cpu/thread_pool.h"
#include "models/gguf_file.h"
#include "planner/plan.h"
#include "runtime/exec/cpu/cpu_backend.h"
#include "runtime/kv/kv_cache.h"
#include "runtime/place/placement.h"
#include "runtime/weights/weight_store.h"
#include "storage/budget.h"
#include "storage/reader.h"
#include "tests/support/tiny_engine.h"
#include "tests/support/tiny_model.h"

using namespace strata;
using namespace strata::models;
using namespace strata::runtime;
using planner::WeightOption;

namespace {

constexpr int kCtx = 32;

// A weight store under `budget_bytes` whose residency comes from place(); keeps what place() saw and made.
struct Placed {
    storage::MemoryBudget budget;
    ResidencyInput input;
    std::optional<Placement> placement;
    std::unique_ptr<WeightStore> store;

    Placed(const GgufFile& file, const Hparams& hp, uint64_t budget_bytes, const planner::Plan* given = nullptr)
        : budget("DRAM", budget_bytes, "--dram") {
        PlacementOptions o;
        o.n_ctx = kCtx;
        o.given = given;
        input = WeightStore::residency_input(file, hp, budget, 0, 2);
        placement = place(file, input, o);
        store = std::make_unique<WeightStore>(file, hp, budget, placement->residency);
    }
};

int n_streamed_by_plan(const planner::Plan& p) {
    int n = 0;
    for (const auto& l : p.layers) n += l.weights == WeightOption::NvmeCpu;
    return n;
}

}  // namespace

TEST_CASE("placement: a budget-driven plan streams layers, with the same logits as all resident", "[unit][placement]") {
    const test::TinyModelFile m("placement_fwd.gguf", test::tiny_config("llama", 256, 6, 1024), 5);
    const std::vector<int32_t> ids{7, 1, 42, 9, 60, 3, 88, 15, 2};
    cpu::ThreadPool pool(2);

    auto run = [&](uint64_t budget_bytes) {
        Placed placed(m.file, m.hp, budget_bytes);
        CHECK(placed.budget.used() <= placed.budget.limit());
        // The store streams exactly the layers the plan reads from NVMe.
        const auto& plan = placed.placement->plan;
        for (size_t il = 0; il < plan.layers.size(); ++il)
            CHECK(placed.store->residency().resident[il] == (plan.layers[il].weights == WeightOption::DramCpu));
        CpuBackend backend(m.hp, *placed.store);
        KvCache kv(m.hp.n_layer, kCtx, m.hp.n_embd_kv());
        return std::make_pair(test::prompt_then_steps(backend, pool, ids, 4, kv), n_streamed_by_plan(plan));
    };
    const auto [resident, none] = run(UINT64_MAX);
    const auto [streamed, n_streamed] = run(16 << 20);
    CHECK(none == 0);
    CHECK(n_streamed >= 4);
    CHECK(streamed == resident);  // bit for bit: offload changes speed, never results
}

TEST_CASE("placement: a plan round-trips through JSON into the same residency", "[unit][placement]") {
    const test::TinyModelFile m("placement_json.gguf", test::tiny_config("qwen2", 256, 6, 1024), 8);

    const Placed made(m.file, m.hp, 18 << 20);
    REQUIRE(made.placement->residency.n_streamed() > 0);
    REQUIRE(made.placement->search.n_policies > 0);
    const planner::Plan loaded = planner::Plan::from_json(made.placement->plan.to_json());
    const Placed replayed(m.file, m.hp, 18 << 20, &loaded);
    const Residency &a = made.placement->residency, &b = replayed.placement->residency;
    CHECK(replayed.placement->search.n_policies == 0);
    CHECK(b.resident == a.resident);
    CHECK(b.n_slots == a.n_slots);
    CHECK(b.slot_bytes == a.slot_bytes);
    CHECK(b.total_bytes == a.total_bytes);
    // A given plan is priced on this machine like a made one.
    CHECK(replayed.placement->plan.prediction.decode_tps_per_seq ==
          Approx(made.placement->plan.prediction.decode_tps_per_seq).epsilon(1e-6));
}

TEST_CASE("placement: for every budget the plan fits and keeps as many whole layers as fit", "[unit][placement]") {
    const test::TinyModelFile m("placement_sweep.gguf", test::tiny_config("llama", 256, 8, 1024), 9);

    const Placed all(m.file, m.hp, UINT64_MAX);
    const ResidencyInput base = all.input;
    const uint64_t layer = base.layer_bytes.front();
    const uint64_t floor = base.fixed_bytes + base.other_bytes + full_ring_bytes(base);
    int last_resident = -1;
    for (uint64_t budget = floor; budget < all.placement->residency.total_bytes + 2 * layer; budget += layer / 3) {
        INFO("budget " << budget);
        const Placed p(m.file, m.hp, budget);
        const Residency& r = p.placement->residency;
        CHECK(r.total_bytes <= budget);
        CHECK(p.budget.used() <= budget);
        const int resident = m.hp.n_layer - r.n_streamed();
        CHECK(resident >= last_resident);  // more DRAM never keeps fewer layers
        last_resident = resident;
        // The same answer as the rule the planner replaced: head first, then the ring, then
        // as many whole layers as fit.
        const int fit = budget >= all.placement->residency.total_bytes
            ? m.hp.n_layer : static_cast<int>(std::min<uint64_t>(m.hp.n_layer, (budget - floor) / layer));
        CHECK(resident == fit);
    }
    CHECK(last_resident == m.hp.n_layer);
    CHECK_THROWS_AS([&] { Placed too_small(m.file, m.hp, floor - 1); }(), OutOfBudget);
}

TEST_CASE("placement: a run is planned for the prompt it has, its KV cache for the whole context", "[unit][placement]") {
    auto workload = [](int n_ctx, int n_predict, int n_prompt = 0) {
        PlacementOptions po;
        po.n_ctx = n_ctx, po.n_predict = n_predict, po.n_prompt = n_prompt;
        return runtime_workload(po);
    };
    const planner::Workload known = workload(4096, 16, 7);
    CHECK(known.prompt_len == 7);
    CHECK(known.gen_len == 16);
    CHECK(known.batch == 1);
    CHECK(known.kv_positions() == 4096);
    // Unknown: a prompt that fills the context beside the generation.
    const planner::Workload unknown = workload(4096, 16);
    CHECK(unknown.prompt_len == 4080);
    CHECK(unknown.kv_positions() == 4096);
    // A prompt longer than the context leaves room for the generation.
    CHECK(workload(256, 16, 1000).prompt_len == 240);
}

TEST_CASE("placement: KV layers the cache spills are shown and priced on disk, as they run", "[unit][placement]") {
    const test::TinyModelFile m("placement_kv_spill.gguf", test::tiny_config("llama", 256, 6, 1024), 5);
    storage::MemoryBudget budget("DRAM", UINT64_MAX, "--dram");
    const ResidencyInput in = WeightStore::residency_input(m.file, m.hp, budget, 0, 2);
    PlacementOptions o;
    o.n_ctx = kCtx;
    const Placement all = place(m.file, in, o);
    o.n_kv_layers_in_dram = 2;  // the cache keeps layers 0-1 in DRAM and spills the rest
    const Placement spilled = place(m.file, in, o);
    for (const auto& l : spilled.plan.layers) {
        INFO("layer " << l.layer);
        CHECK(l.kv == (l.layer < 2 ? planner::KvOption::Dram : planner::KvOption::Nvme));
    }
    // Priced as read from disk each step: the disk busy, never faster (hidden behind compute on a
    // fast disk, so not always slower).
    const auto nvme = static_cast<size_t>(planner::Stream::Nvme);
    CHECK(spilled.plan.prediction.decode.stream_s[nvme] > all.plan.prediction.decode.stream_s[nvme]);
    CHECK(spilled.plan.prediction.decode_tps_per_seq <= all.plan.prediction.decode_tps_per_seq);
}

TEST_CASE("placement: a batch is planned as its sequences, each with its share of the KV cache", "[unit][placement]") {
    PlacementOptions po;
    po.n_ctx = 1024, po.n_predict = 32, po.n_prompt = 300, po.n_batch = 16;
    po.kv_positions = 16 * 1024;  // every sequence its whole context (bench's)
    const planner::Workload own = runtime_workload(po);
    CHECK(own.batch == 16);
    CHECK(own.prompt_len == 300);
    CHECK(own.gen_len == 32);
    CHECK(own.kv_positions() == 1024);
    // A cache of n_ctx positions shared by the batch (batch's, serve's): a sequence holds its share.
    po.kv_positions = 0;
    const planner::Workload shared = runtime_workload(po);
    CHECK(shared.batch == 16);
    CHECK(shared.kv_positions() == 64);
    CHECK(shared.prompt_len == 64 - 32);
}

TEST_CASE("placement: a batch's KV cache is counted once, as the runtime holds it", "[unit][placement]") {
    const test::TinyModelFile m("placement_batch.gguf", test::tiny_config("llama", 256, 6, 1024), 13);
    constexpr int kBatch = 16, kSeqCtx = 256;
    // The runtime's cache for every sequence's whole context, beside the weights: about twice their bytes.
    const uint64_t kv = KvCache::layer_bytes(KvCache::blocks_for(kBatch * kSeqCtx), m.hp.n_embd_kv(), DType::F32, false) *
                        uint64_t(m.hp.n_layer);
    auto place_batch = [&](uint64_t budget_bytes, int n_batch) {
        storage::MemoryBudget budget("DRAM", budget_bytes, "--dram");
        const ResidencyInput in = WeightStore::residency_input(m.file, m.hp, budget, kv, 2);
        PlacementOptions po;
        po.n_ctx = kSeqCtx, po.n_predict = 16, po.n_prompt = 64;
        po.n_batch = n_batch, po.kv_positions = kBatch * kSeqCtx;
        return place(m.file, in, po);
    };
    const Placement unbounded = place_batch(0, kBatch);
    const uint64_t all = unbounded.residency.total_bytes;
    REQUIRE(kv > all / 3);
    // DRAM that holds every layer and the cache: the batch's plan keeps every layer, as one sequence's does.
    for (int n_batch : {1, kBatch}) {
        INFO("batch " << n_batch);
        const Placement p = place_batch(all + (1 << 20), n_batch);
        CHECK(p.plan.workload.batch == n_batch);
        CHECK(n_streamed_by_plan(p.plan) == 0);
        CHECK(p.residency.total_bytes <= all + (1 << 20));
    }
}

TEST_CASE("placement: when nothing fits, the way out names the runtime's flags, not strata plan's", "[unit][placement]") {
    const test::TinyModelFile m("placement_hint.gguf", test::tiny_config("llama", 256, 4, 512), 11);
    // A KV cache of 1 GiB beside the weights, in 64 MiB of DRAM.
    storage::MemoryBudget budget("DRAM", 64ull << 20, "--dram");
    const ResidencyInput in = WeightStore::residency_input(m.file, m.hp, budget, 1ull << 30, 2);
    PlacementOptions po;
    po.n_ctx = kCtx;
    try {
        place(m.file, in, po);
        FAIL("placed a million-token KV cache in 64 MiB");
    } catch (const OutOfBudget& e) {
        CHECK_THAT(e.hint(), !Catch::Contains("--gpu-budget") && !Catch::Contains("--dram-budget"));
    }
}

TEST_CASE("placement: streamed reads keep as many chunks in flight as the disk needs for its rate", "[unit][placement]") {
    const storage::ReaderOptions reader;
    planner::DiskProfile disk;
    CHECK(stream_read_chunks(disk) == reader.queue_depth);  // no depth curve measured: the reader's default
    // Near its best rate at 4 MiB in flight: that many chunks, so the layer needed next is read first.
    disk.read_depth_curve = {{1u << 20, 1.0}, {2u << 20, 2.0}, {4u << 20, 2.9}, {8u << 20, 3.0}, {32u << 20, 3.0}};
    CHECK(stream_read_chunks(disk) * reader.chunk_bytes == 4u << 20);
    // A disk at its rate with one read in flight still gets two: one in flight while the other is reissued.
    disk.read_depth_curve = {{1u << 20, 3.0}, {32u << 20, 3.0}};
    CHECK(stream_read_chunks(disk) == 2);
    // A probe whose points scatter (a VM's: 94.7% of the best at 4 MiB, a dip at 8 MiB) still
    // keeps the reads in order: 4 chunks, where 32 in flight finished the ring's reads together.
    disk.read_depth_curve = {{1u << 20, 3.19}, {2u << 20, 3.62}, {4u << 20, 3.87}, {8u << 20, 1.73}, {32u << 20, 4.09}};
    CHECK(stream_read_chunks(disk) == 4);
    // One that needs the deepest queue gets the reader's whole depth.
    disk.read_depth_curve = {{1u << 20, 1.0}, {32u << 20, 3.0}, {64u << 20, 3.0}};
    CHECK(stream_read_chunks(disk) == reader.queue_depth);
}
