// KV cache layers spilled to disk give the same logits as an all-DRAM cache, in every KV
// element type, keys-only (MLA) layers keep one row per position there too, and a spill
// directory that cannot take the file is a clear error.
#include <catch2/catch.hpp>

#include <sys/mount.h>

#include <cstring>

#include "core/error.h"
#include "runtime/kv/kv_cache.h"
#include "runtime/kv/scratch_file.h"
#include "storage/file_io.h"
#include "tests/support/gguf_writer.h"
#include "tests/support/skip.h"
#include "tests/support/tiny_engine.h"
#include "tests/support/tiny_model.h"

using namespace strata;
using namespace strata::runtime;

TEST_CASE("spilled KV layers give the same logits as an all-DRAM cache", "[unit][kv]") {
    test::TinyCpuModel m("kv_model.gguf", test::tiny_config("llama", 128, 6, 256), 5);
    const std::vector<int32_t> ids{7, 1, 2, 80, 44, 3, 9, 12, 70, 31, 5};

    auto run = [&](KvCache& kv) {
        const SeqId seq = kv.create_seq();
        std::vector<float> all = m.prompt_then_steps(ids, 6, kv, seq);
        // A shared prefix is kept and the rest recomputed: the spill file must follow.
        REQUIRE(kv.truncate_seq(seq, 4) == 4);
        const auto step = test::eval_seq(m.backend, m.pool, kv, seq, std::span(ids).subspan(4, 3), true);
        all.insert(all.end(), step.begin(), step.end());
        return all;
    };
    // Every KV type: spilled blocks are padded for O_DIRECT, resident ones are not. With 5
    // resident layers the one spilled layer's ring has one slot: its next read is issued as soon
    // as its write-back is queued (runtime/kv/staged_writer.h) and must see the written rows.
    for (const DType type : {DType::F32, DType::F16, DType::BF16, DType::Q8_0}) {
        KvCache resident(m.hp.n_layer, 64, m.hp.n_embd_kv(), 0, type);
        const auto want = run(resident);
        for (int n_resident : {0, 2, 5}) {
            KvSpillOptions opts;
            opts.n_resident_layers = n_resident;
            opts.dir = test::temp_path("kv_spill");
            opts.prefetch_depth = 2;
            KvCache spilled(m.hp.n_layer, 64, m.hp.n_embd_kv(), opts, 0, type);
            CHECK(spilled.n_spilled() == m.hp.n_layer - n_resident);
            INFO(dtype_name(type) << ", " << n_resident << " resident layers");
            CHECK(run(spilled) == want);  // bit for bit
        }
    }
    // The spill files are unlinked at once, and the folder made for them goes with them.
    CHECK_FALSE(std::filesystem::exists(test::temp_path("kv_spill")));
}

TEST_CASE("a spill directory that is not a directory is a clear error", "[unit][kv]") {
    KvSpillOptions opts;
    opts.n_resident_layers = 0;
    opts.dir = "/dev/null/spill";
    CHECK_THROWS_WITH(KvCache(2, 64, 128, opts), Catch::Contains("KV spill file in '/dev/null/spill'") &&
                                                     Catch::Contains("cannot create it"));
}

TEST_CASE("a spill directory on a full disk is a clear error", "[unit][kv]") {
    KvSpillOptions opts;
    opts.n_resident_layers = 0;
    const auto dir = test::temp_path("kv_full");
    std::filesystem::create_directories(dir);
    if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=1M") != 0) STRATA_SKIP("cannot mount a small tmpfs here (needs root)");
    struct Unmount {
        std::filesystem::path dir;
        ~Unmount() { ::umount(dir.c_str()); }
    } unmount{dir};
    opts.dir = dir;
    try {
        KvCache kv(4, 4096, 256, opts);  // 32 MiB of spill file
        FAIL("no error");
    } catch (const IoError& e) {
        CHECK_THAT(e.what(), Catch::Contains("cannot reserve 32 MiB") && Catch::Contains("No space left"));
        CHECK_THAT(e.hint(), Catch::Contains("--kv-spill"));
    }
}

TEST_CASE("keys-only (MLA) spilled layers write and read back one row per position, read as keys and values", "[unit][kv]") {
    const int32_t n_layer = 2, n_embd_kv = 40;
    KvSpillOptions keys;
    keys.dir = test::temp_path("kv_spill_keys");
    keys.prefetch_depth = 1;
    keys.keys_only = true;
    KvCache kv(n_layer, 64, n_embd_kv, keys);
    REQUIRE(kv.n_spilled() == n_layer);

    const SeqId seq = kv.create_seq();
    kv.reserve(seq, 20);  // two blocks
    const auto table = kv.block_table(seq);
    const std::vector<int32_t> dirty(table.begin(), table.begin() + 2);
    auto row_of = [&](int32_t layer, int32_t pos) {
        std::vector<float> row(n_embd_kv);
        for (int32_t i = 0; i < n_embd_kv; ++i) row[i] = float(layer * 1000 + pos * 10 + i);
        return row;
    };
    const std::vector<float> ignored(n_embd_kv, -1.0f);
    for (int32_t layer = 0; layer < n_layer; ++layer) {
        kv.begin_layer(layer);
        for (int32_t pos = 0; pos < 20; ++pos)
            kv.store(layer, table[pos / KvCache::kBlockSize], pos % KvCache::kBlockSize, row_of(layer, pos).data(), ignored.data());
        kv.end_layer(layer, dirty);
    }
    // Read back from the file, a layer at a time: the values are the keys.
    std::vector<float> back(n_embd_kv);
    for (int32_t layer = 0; layer < n_layer; ++layer) {
        kv.begin_layer(layer);
        for (int32_t pos = 0; pos < 20; ++pos) {
            const int32_t block = table[pos / KvCache::kBlockSize];
            CHECK(kv.v(layer, block) == kv.k(layer, block));
            std::memcpy(back.data(), kv.k(layer, block) + (pos % KvCache::kBlockSize) * kv.row_bytes(), n_embd_kv * sizeof(float));
            CHECK(back == row_of(layer, pos));
        }
        kv.end_layer(layer, {});
    }
}

TEST_CASE("a spill directory that did not exist is made for the file and removed with it", "[unit][kv]") {
    const std::filesystem::path root = test::temp_path("spill_made");
    std::filesystem::remove_all(root);
    std::filesystem::create_directories(root);
    const std::filesystem::path dir = root / "a" / "b";
    {
        const ScratchFile file(dir, "KV spill file", "--kv-spill", 64 * storage::kDefaultDioAlign);
        CHECK(std::filesystem::is_directory(dir));
    }
    CHECK_FALSE(std::filesystem::exists(root / "a"));  // only what it made
    CHECK(std::filesystem::exists(root));
    {
        std::filesystem::create_directories(dir);
        const ScratchFile file(dir, "KV spill file", "--kv-spill", 64 * storage::kDefaultDioAlign);
    }
    CHECK(std::filesystem::is_directory(dir));  // one given that existed stays
}
