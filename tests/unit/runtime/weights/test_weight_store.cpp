#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/trace.h"
#include "cpu/thread_pool.h"
#include "models/gguf_file.h"
#include "runtime/exec/cpu/cpu_backend.h"
#include "runtime/kv/kv_cache.h"
#include "runtime/weights/weight_store.h"
#include "storage/budget.h"
#include "tests/support/gguf_writer.h"
#include "tests/support/planned.h"
#include "tests/support/tiny_engine.h"
#include "tests/support/tiny_model.h"

using namespace strata;
using namespace strata::models;
using namespace strata::runtime;

namespace {
std::vector<const WeightRef*> refs(const LayerWeights& l) {
    return {&l.attn_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_norm, &l.ffn_gate, &l.ffn_up, &l.ffn_down};
}

// A store for tiny_config("llama", 256, 6, 1024), whose layers are ~3.9 MiB: 17 MiB holds the
// head, a ring of 3 layer buffers and one more layer, so 5 of the 6 layers stream.
struct FiveStreamed {
    storage::MemoryBudget budget{"DRAM", 17 << 20, "--dram"};
    WeightStore store;

    explicit FiveStreamed(const test::TinyModelFile& m) : store(m.file, m.hp, budget, test::planned(m.file, m.hp, budget, 0, 2)) {
        REQUIRE(store.residency().n_streamed() == 5);
    }
};
// Logits with every layer resident and with most streamed: bit for bit the same (same kernels, same order).
void check_streamed_forward(const test::TinyModelFile& m) {
    const std::vector<int32_t> ids{3, 14, 15, 92, 65, 35, 89, 79};
    cpu::ThreadPool pool(2);

    auto logits_with = [&](uint64_t budget_bytes) {
        storage::MemoryBudget budget("DRAM", budget_bytes, "--dram");
        WeightStore store(m.file, m.hp, budget, test::planned(m.file, m.hp, budget, 0, 1));
        CpuBackend backend(m.hp, store);
        KvCache kv(m.hp.n_layer, 32, m.hp.n_embd_kv());
        const std::vector<float> all = test::prompt_then_steps(backend, pool, ids, 5, kv);
        // A mixture of experts offloads its routed experts instead of streaming whole layers.
        const auto& cached = store.residency().experts_cached;
        return std::make_pair(all, store.residency().n_streamed() + static_cast<int>(std::count(cached.begin(), cached.end(), true)));
    };
    const auto [resident, none] = logits_with(UINT64_MAX);
    const auto [streamed, n_streamed] = logits_with(14 << 20);
    CHECK(none == 0);
    CHECK(n_streamed >= 4);  // layers streamed, or with their experts offloaded
    CHECK(streamed == resident);  // bit for bit: same kernels, same order
}

}  // namespace

TEST_CASE("streamed layers arrive with the same bytes as the mapped file, pass after pass", "[unit][stream]") {
    const test::TinyModelFile m("stream_model.gguf", test::tiny_config("llama", 256, 6, 1024), 7);
    const auto reference = ModelWeights::bind(m.file, m.hp);

    FiveStreamed five(m);
    WeightStore& store = five.store;
    CHECK(five.budget.used() <= five.budget.limit());

    auto check_layer = [&](int il) {
        const LayerWeights& got = store.acquire(il);
        const auto want = refs(reference.layers[il]), have = refs(got);
        for (size_t i = 0; i < want.size(); ++i)
            CHECK(std::memcmp(want[i]->data, have[i]->data, want[i]->info->nbytes) == 0);
        store.release(il);
    };
    for (int pass = 0; pass < 3; ++pass)
        for (int il = 0; il < m.hp.n_layer; ++il) check_layer(il);
    CHECK(store.stats().layers_read == 3u * store.residency().n_streamed());

    // A pass that stopped part-way (an error mid-forward) is followed by a fresh one.
    check_layer(0);
    check_layer(1);
    for (int il = 0; il < m.hp.n_layer; ++il) check_layer(il);
}

TEST_CASE("a forward pass with streamed layers gives the same logits as with all resident", "[unit][stream]") {
    // qwen2; qwen3moe's 3-D expert tensors; phi3's fused tensors (views of their rows) and
    // LongRoPE factors (outside the layers).
    auto moe = test::tiny_config("qwen3moe", 256, 6, 1024);
    moe["qk_norm"] = true, moe["n_expert"] = 4, moe["n_expert_used"] = 2, moe["n_ff_exp"] = 256;
    auto phi3 = test::tiny_config("phi3", 256, 6, 1024);
    phi3["fused"] = true, phi3["rope_factors"] = true, phi3["orig_ctx"] = 16;
    for (const auto& config : {test::tiny_config("qwen2", 256, 6, 1024), moe, phi3}) {
        const std::string arch = config["arch"];
        SECTION(arch) { check_streamed_forward(test::TinyModelFile("stream_" + arch + "_fwd.gguf", config, 11)); }
    }
}

TEST_CASE("the trace shows every layer read, wait and compute slice", "[unit][stream][trace]") {
    const test::TinyModelFile m("stream_model.gguf", test::tiny_config("llama", 256, 6, 1024), 7);
    const auto trace_path = test::temp_path("trace.json");
    {
        Trace trace(trace_path);
        FiveStreamed five(m);
        WeightStore& store = five.store;
        store.set_trace(&trace);
        for (int pass = 0; pass < 2; ++pass)
            for (int il = 0; il < m.hp.n_layer; ++il) {
                store.acquire(il);
                store.release(il);
            }
    }
    std::ifstream in(trace_path);
    const auto j = nlohmann::json::parse(in);
    std::map<std::string, int> per_track;
    std::map<int, std::string> names;
    for (const auto& e : j["traceEvents"])
        if (e["ph"] == "M") names[e["tid"].get<int>()] = e["args"]["name"];
    for (const auto& e : j["traceEvents"])
        if (e["ph"] == "X") {
            CHECK(e["dur"].get<double>() >= 0);
            ++per_track[names[e["tid"].get<int>()]];
        }
    CHECK(per_track["io: weights reads"] == 2 * 5);
    CHECK(per_track["compute: waiting for weights"] == 2 * 5);
    CHECK(per_track["compute: layers"] == 2 * 6);
}

TEST_CASE("resident weights survive the model file being cut short, streamed layers fail with an IoError", "[unit][stream]") {
    const test::TinyModelFile m("stream_model_cut.gguf", test::tiny_config("llama", 256, 6, 1024), 7);
    const auto ref_path = test::temp_path("stream_model_uncut.gguf");
    std::filesystem::copy_file(m.path, ref_path, std::filesystem::copy_options::overwrite_existing);
    const auto ref_file = GgufFile::open(ref_path);
    const auto reference = ModelWeights::bind(ref_file, m.hp);

    FiveStreamed five(m);
    WeightStore& store = five.store;
    std::filesystem::resize_file(m.path, m.file.file_size() / 2);

    // Mapped from the file, these reads would be SIGBUS now.
    const WeightRef& embd = store.weights().tok_embd;
    CHECK(std::memcmp(embd.data, reference.tok_embd.data, embd.info->nbytes) == 0);
    for (int pass = 0; pass < 2; ++pass)
        for (int il = 0; il < m.hp.n_layer; ++il) {
            if (!store.residency().resident[il]) {
                // Read before the cut and found stale, or read after it and found short.
                try {
                    store.acquire(il);
                    FAIL("a streamed layer of the cut file was acquired");
                } catch (const IoError& e) {
                    const std::string m = e.what();
                    CHECK((m.find("changed on disk") != std::string::npos || m.find("unexpected end") != std::string::npos));
                }
                continue;
            }
            const LayerWeights& got = store.acquire(il);
            CHECK(std::memcmp(got.wq.data, reference.layers[il].wq.data, got.wq.info->nbytes) == 0);
            store.release(il);
        }
}

TEST_CASE("after a failed read the next passes bring every streamed layer whole", "[unit][stream]") {
    const test::TinyModelFile m("stream_model_eio.gguf", test::tiny_config("llama", 256, 6, 1024), 7);
    const auto reference = ModelWeights::bind(m.file, m.hp);

    // The Nth weight read fails; N runs past the resident weights' reads at load and over a
    // whole cycle of streamed reads, so that the failure hits each layer of the ring in turn,
    // including the first, where the next pass starts on the slot whose read failed.
    for (int nth = 30; nth < 54; ++nth) {
        INFO("eio:" << nth);
        setenv("STRATA_FAULT_IO", fmt::format("eio:{}", nth).c_str(), 1);
        std::unique_ptr<FiveStreamed> five;
        try {
            five = std::make_unique<FiveStreamed>(m);
        } catch (...) {
            unsetenv("STRATA_FAULT_IO");
            throw;
        }
        unsetenv("STRATA_FAULT_IO");
        WeightStore& store = five->store;

        int failures = 0, exact_passes_after = 0;
        for (int pass = 0; pass < 6; ++pass) {
            bool whole = true;
            for (int il = 0; il < m.hp.n_layer && whole; ++il) {
                try {
                    const LayerWeights& got = store.acquire(il);
                    const auto want = refs(reference.layers[il]), have = refs(got);
                    for (size_t i = 0; i < want.size(); ++i)
                        CHECK(std::memcmp(want[i]->data, have[i]->data, want[i]->info->nbytes) == 0);
                    store.release(il);
                } catch (const IoError& e) {
                    CHECK_THAT(e.what(), Catch::Contains("Input/output error"));
                    ++failures;
                    whole = false;  // the pass is abandoned, as a forward pass that throws is
                }
            }
            if (whole && failures > 0) ++exact_passes_after;
        }
        CHECK(failures == 1);
        CHECK(exact_passes_after >= 3);
    }
}

TEST_CASE("with a device, only the layers the CPU runs are rewritten into the CPU's tiles; the rest and the head stay "
          "as the device copies them",
          "[unit][tile]") {
    nlohmann::json config = test::tiny_config("llama", 256, 4, 512);
    config["weight_type"] = "Q8_0";
    const test::TinyModelFile m("tile_some_layers.gguf", config, 5);
    const auto file = ModelWeights::bind(m.file, m.hp);
    storage::MemoryBudget budget("DRAM", UINT64_MAX, "--dram");
    WeightStore store(m.file, m.hp, budget, test::planned(m.file, m.hp, budget));
    const std::vector<bool> cpu_layers{true, false, false, true};
    cpu::ThreadPool pool(2);
    uint64_t bytes = 0;
    pool.run([&] { bytes = store.tile_for_cpu(&cpu_layers); });
    uint64_t cpu_matrix_bytes = 0;
    for (int il = 0; il < m.hp.n_layer; ++il) {
        const LayerWeights& got = store.acquire(il);
        for (auto mat : LayerWeights::kMatrices) {
            const WeightRef& w = got.*mat;
            const WeightRef& in_file = file.layers[il].*mat;
            if (!w || w.n_rows == 1) continue;
            INFO("layer " << il);
            const bool same = std::memcmp(w.data, in_file.data, w.info->nbytes) == 0;
            if (cpu_layers[il]) {
                cpu_matrix_bytes += w.bytes();
                CHECK(w.tiled == (bytes > 0));  // no tiles where the CPU has no AVX-512 path
                CHECK(same == !w.tiled);
            } else {
                CHECK_FALSE(w.tiled);
                CHECK(same);
            }
        }
        store.release(il);
    }
    CHECK((bytes == 0 || bytes == cpu_matrix_bytes));
    const WeightRef& head = store.weights().output;
    CHECK_FALSE(head.tiled);
    CHECK(std::memcmp(head.data, file.output.data, head.info->nbytes) == 0);
}

TEST_CASE("op offload's staging gives resident layers as laid out in the file, rebuilt from DRAM, its pinned buffers "
          "charged until dropped",
          "[unit][stream]") {
    // A dense model held whole in DRAM; a mixture of experts whose experts are cached, whose
    // layers (not held whole) are read from the file again.
    auto moe = test::tiny_config("qwen3moe", 256, 6, 1024);
    moe["qk_norm"] = true, moe["n_expert"] = 4, moe["n_expert_used"] = 2, moe["n_ff_exp"] = 256;
    auto dense = test::tiny_config("llama", 256, 4, 512);
    dense["weight_type"] = "Q8_0";
    const bool is_moe = GENERATE(false, true);
    const test::TinyModelFile m(is_moe ? "as_read_moe.gguf" : "as_read.gguf", is_moe ? moe : dense, 6);
    std::vector<std::byte> file_bytes(std::filesystem::file_size(m.path));
    std::ifstream(m.path, std::ios::binary).read(reinterpret_cast<char*>(file_bytes.data()), std::streamsize(file_bytes.size()));
    storage::MemoryBudget budget("DRAM", is_moe ? 14 << 20 : UINT64_MAX, "--dram");
    WeightStore store(m.file, m.hp, budget, test::planned(m.file, m.hp, budget));
    const auto& cached = store.residency().experts_cached;
    const bool any_cached = std::count(cached.begin(), cached.end(), true) > 0;
    REQUIRE(any_cached == is_moe);
    std::vector<int> resident;
    for (int il = 0; il < m.hp.n_layer; ++il)
        if (store.residency().resident[il]) resident.push_back(il);
    REQUIRE(resident.size() >= 2);
    storage::MemoryBudget staging("DRAM", UINT64_MAX, "--dram");  // the weights' own is full for the experts' cache
    const uint64_t before = staging.used();
    const uint64_t pinned = store.stage_as_read(resident, 2, staging);
    CHECK(pinned > 0);
    CHECK(staging.used() >= before + pinned);
    // Then rewritten into the CPU's tiles where this CPU has them, in the engine's order.
    cpu::ThreadPool pool(2);
    uint64_t tiled = 0;
    pool.run([&] { tiled = store.tile_for_cpu(nullptr); });
    const uint64_t read_before = store.stats().bytes_read;
    // Every tensor's bytes below `ready` where the device looks for them (the padding between is not read).
    auto check_tensors = [&](int il, WeightStore::HostRange r) {
        int checked = 0;
        const LayerWeights& l = store.weights().layers[size_t(il)];
        for (auto member : LayerWeights::kAll) {
            const WeightRef& w = l.*member;
            const uint64_t at = w ? store.offset_in_layer(il, w) : 0;
            if (!w || at + w.bytes() > r.length) continue;
            CHECK(std::memcmp(r.data + at, file_bytes.data() + file_offset(m.file, w), w.bytes()) == 0);
            ++checked;
        }
        return checked;
    };
    std::vector<const std::byte*> rebuilt_at;  // the buffers rebuilt layers came in, in order
    for (int cycle = 0; cycle < 2; ++cycle)
        for (int il : resident) {
            INFO("cycle " << cycle << ", layer " << il << (store.residency().cached_experts(il) ? ", experts cached" : ""));
            CHECK(store.rebuilds(il) == !store.residency().cached_experts(il));
            // A rebuilt layer says as it goes which of its bytes are ready, for its copy to begin.
            std::vector<uint64_t> ready;
            WeightStore::HostRange r;
            pool.run([&] {
                r = store.acquire_as_read(il, [&](WeightStore::HostRange part) {
                    CHECK((ready.empty() || part.length >= ready.back()));
                    check_tensors(il, part);
                    ready.push_back(part.length);
                });
            });
            CHECK(check_tensors(il, r) > 0);
            if (store.rebuilds(il)) rebuilt_at.push_back(r.data);
            for (uint64_t n : ready) CHECK(n <= r.length);
            // One for each tiled matrix (none where this CPU does not tile them).
            if (tiled > 0 && !store.residency().cached_experts(il)) CHECK(ready.size() >= 2);
            store.release_as_read();
        }
    // Rebuilt layers take the two buffers in turn: each stays as it was until taken again.
    if (!is_moe) REQUIRE(rebuilt_at.size() >= 3);  // every layer of the dense model: 4 layers, twice
    for (size_t i = 0; i + 2 < rebuilt_at.size(); ++i) {
        CHECK(rebuilt_at[i] != rebuilt_at[i + 1]);
        CHECK(rebuilt_at[i] == rebuilt_at[i + 2]);
    }
    // The layers held whole in DRAM were rebuilt from it; only those with cached experts were read.
    CHECK((store.stats().bytes_read > read_before) == any_cached);
    store.drop_as_read();
    CHECK(staging.used() == before);
    store.drop_as_read();  // again: nothing left to drop
    CHECK(staging.used() == before);
}

TEST_CASE("op offload's staging rebuilds in one buffer where the budget has no room for one a slot", "[unit][stream]") {
    // Layers of several MiB, so that one buffer and two differ past the pool's rounding.
    nlohmann::json config = test::tiny_config("llama", 1024, 4, 2048);
    config["weight_type"] = "Q8_0";
    const test::TinyModelFile m("as_read_one.gguf", config, 6);
    storage::MemoryBudget budget("DRAM", UINT64_MAX, "--dram");
    WeightStore store(m.file, m.hp, budget, test::planned(m.file, m.hp, budget));
    const std::vector<int> layers{0, 1, 2, 3};
    uint64_t two = 0;
    {
        storage::MemoryBudget roomy("DRAM", UINT64_MAX, "--dram");
        two = store.stage_as_read(layers, 2, roomy);
        store.drop_as_read();
    }
    storage::MemoryBudget tight("DRAM", two * 3 / 4, "--dram");
    const uint64_t one = store.stage_as_read(layers, 2, tight);
    CHECK(one <= two * 3 / 4);
    CHECK(one > 0);
    cpu::ThreadPool pool(2);
    std::vector<const std::byte*> at;
    for (int il : layers) {
        WeightStore::HostRange r;
        pool.run([&] { r = store.acquire_as_read(il); });
        at.push_back(r.data);
        store.release_as_read();
    }
    CHECK(std::all_of(at.begin(), at.end(), [&](const std::byte* p) { return p == at.front(); }));
    store.drop_as_read();
    CHECK(tight.used() == 0);
}
