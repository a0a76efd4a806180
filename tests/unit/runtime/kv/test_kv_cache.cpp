// Sequences over the paged KV cache: block tables, prefix attachment, truncation of shared
// blocks, and the pool returning to its former use when sequences go; rows stored in each
// element type and the bytes each type takes.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include <algorithm>
#include <cmath>
#include <memory>
#include <cstring>
#include <random>
#include <vector>

#include "core/error.h"
#include "runtime/kv/kv_cache.h"
#include "tests/support/kv_values.h"
#include "tests/support/gguf_writer.h"

using namespace strata;
using namespace strata::runtime;

namespace {
// Registers what it is given (refusing its `refuse`-th call, counting from 1, if set) and
// checks that exactly the registered ranges come back.
struct RecordingPinner : storage::HostPinner {
    int refuse = 0, calls = 0;
    std::vector<std::pair<const std::byte*, size_t>> live;
    std::string_view name() const override { return "recording pinner"; }
    std::string register_memory(void* base, size_t bytes) override {
        if (++calls == refuse) return "refused";
        live.emplace_back(static_cast<const std::byte*>(base), bytes);
        return {};
    }
    void unregister_memory(void* base, size_t bytes) noexcept override {
        const auto it = std::find(live.begin(), live.end(), std::pair{static_cast<const std::byte*>(base), bytes});
        CHECK(it != live.end());
        if (it != live.end()) live.erase(it);
    }
    bool covers(const std::byte* p, size_t n) const {
        return std::any_of(live.begin(), live.end(), [&](const auto& r) { return p >= r.first && p + n <= r.first + r.second; });
    }
};

std::vector<int32_t> tokens(int n, int32_t salt = 0) {
    std::vector<int32_t> t(n);
    for (int i = 0; i < n; ++i) t[i] = (i * 7 + salt) % 50;
    return t;
}
}  // namespace

TEST_CASE("kv cache: a sequence gets a block per 16 positions and gives them back", "[unit][kv]") {
    KvCache kv(2, 256, 64, 8);
    CHECK(kv.pool().n_blocks() == 8);
    const SeqId s = kv.create_seq();
    const auto t = tokens(40);
    REQUIRE(kv.reserve(s, 40));
    CHECK(kv.block_table(s).size() == 3);
    kv.commit(s, t);
    CHECK(kv.seq_len(s) == 40);
    CHECK(kv.pool().n_used() == 3);
    CHECK(kv.pool().n_cached() == 2);  // the two full blocks
    // Rows of different blocks do not overlap.
    const auto table = kv.block_table(s);
    CHECK(kv.k(1, table[1]) - kv.k(1, table[0]) == (table[1] - table[0]) * kv.block_stride(1));
    CHECK(kv.block_stride(1) >= KvCache::kBlockSize * kv.row_bytes());

    CHECK_FALSE(kv.reserve(kv.create_seq(), 16 * 6));  // 6 more blocks: only 5 free
    kv.free_seq(s);
    CHECK(kv.pool().n_used() == 5);  // the failed reservation keeps what it took
}

TEST_CASE("kv cache: a later sequence attaches the cached blocks of a shared prefix", "[unit][kv]") {
    KvCache kv(2, 256, 64, 16);
    const auto t = tokens(50);
    const SeqId a = kv.create_seq();
    REQUIRE(kv.reserve(a, 50));
    kv.commit(a, t);
    kv.free_seq(a);
    CHECK(kv.pool().n_used() == 0);
    CHECK(kv.pool().n_cached() == 3);

    const SeqId b = kv.create_seq();
    auto same_start = t;
    same_start.resize(45);
    same_start.push_back(99);
    CHECK(kv.attach_prefix(b, same_start) == 32);  // whole blocks only: 45 common tokens -> 2 blocks
    CHECK(kv.seq_len(b) == 32);
    CHECK(kv.pool().n_used() == 2);

    const SeqId c = kv.create_seq();
    CHECK(kv.attach_prefix(c, std::span(t).first(32)) == 16);  // never the whole prompt
    const SeqId d = kv.create_seq();
    auto other = t;
    other[3] = 49;  // a different token in the first block: nothing to share
    CHECK(kv.attach_prefix(d, other) == 0);
    CHECK(kv.block_table(b)[0] == kv.block_table(c)[0]);
    CHECK(kv.pool().ref_count(kv.block_table(b)[0]) == 2);
}

TEST_CASE("kv cache: a prefix spill the disk cannot hold is left out, with a warning, and evictions still work", "[unit][kv]") {
    KvSpillOptions opts;
    opts.n_resident_layers = 2;
    const auto file = test::temp_path("prefix_spill_not_a_dir");
    std::ofstream(file) << "a file where the spill folder should be";  // as a full or read-only disk, the file cannot be made
    opts.dir = file;
    opts.prefix_spill_bytes = uint64_t{1} << 20;
    KvCache kv(2, 256, 64, opts, 4, DType::F16);
    for (int round = 0; round < 2; ++round) {  // the second prompt's blocks evict the first's, dropped
        const SeqId s = kv.create_seq();
        REQUIRE(kv.reserve(s, 48));
        kv.commit(s, tokens(48, round + 1));
        kv.free_seq(s);
    }
    CHECK(kv.n_prefix_spilled() == 0);
    std::filesystem::remove(file);
}

TEST_CASE("kv cache: prefix blocks evicted from DRAM come back from disk with their KV", "[unit][kv]") {
    KvSpillOptions opts;
    opts.n_resident_layers = 2;
    opts.dir = test::temp_path("prefix_spill");
    opts.prefix_spill_bytes = uint64_t{1} << 20;
    KvCache kv(2, 256, 64, opts, 4, DType::F16);  // 4 blocks: a second prompt evicts the first's
    // Rows that name their position, layer and side, so a wrong block shows.
    auto store_rows = [&](SeqId s, int n, float salt) {
        std::vector<float> k(64), v(64);
        const auto table = kv.block_table(s);
        for (int l = 0; l < 2; ++l)
            for (int p = 0; p < n; ++p) {
                for (int i = 0; i < 64; ++i) k[i] = salt + 100.0f * l + p + i / 64.0f, v[i] = -k[i];
                kv.store(l, table[p / KvCache::kBlockSize], p % KvCache::kBlockSize, k.data(), v.data());
            }
    };
    const auto first = tokens(48, 1), second = tokens(48, 2);
    const SeqId a = kv.create_seq();
    REQUIRE(kv.reserve(a, 48));
    store_rows(a, 48, 1000.0f);
    kv.commit(a, first);
    kv.free_seq(a);
    const SeqId b = kv.create_seq();  // takes blocks, evicting (and spilling) the first's
    REQUIRE(kv.reserve(b, 48));
    store_rows(b, 48, 2000.0f);
    kv.commit(b, second);
    kv.free_seq(b);
    CHECK(kv.n_prefix_spilled() >= 2);

    const SeqId c = kv.create_seq();
    CHECK(kv.attach_prefix(c, first) == 32);  // two whole blocks: 48 tokens, never all of them
    CHECK(kv.n_prefix_restored() == 2);
    const auto table = kv.block_table(c);
    for (int l = 0; l < 2; ++l)
        for (int p = 0; p < 32; ++p) {
            INFO("layer " << l << " position " << p);
            const auto* krow = kv.k(l, table[p / KvCache::kBlockSize]) + (p % KvCache::kBlockSize) * kv.row_bytes();
            const auto* vrow = kv.v(l, table[p / KvCache::kBlockSize]) + (p % KvCache::kBlockSize) * kv.row_bytes();
            CHECK(test::kv_value(DType::F16, krow, 5) == Approx(1000.0f + 100.0f * l + p + 5 / 64.0f).epsilon(1e-3));
            CHECK(test::kv_value(DType::F16, vrow, 5) == Approx(-(1000.0f + 100.0f * l + p + 5 / 64.0f)).epsilon(1e-3));
        }
    CHECK(std::filesystem::is_empty(test::temp_path("prefix_spill")));  // the file is unlinked at once
}

TEST_CASE("kv cache: unshare gives a sequence copies of the blocks it shares, byte for byte", "[unit][kv]") {
    KvCache kv(2, 256, 64, 9, DType::F16);
    const auto t = tokens(50);
    const SeqId a = kv.create_seq();
    REQUIRE(kv.reserve(a, 50));
    std::vector<float> k(64), v(64);
    for (int l = 0; l < 2; ++l)
        for (int p = 0; p < 50; ++p) {
            for (int i = 0; i < 64; ++i) k[i] = 100.0f * l + p + i / 64.0f, v[i] = -k[i];
            kv.store(l, kv.block_table(a)[p / KvCache::kBlockSize], p % KvCache::kBlockSize, k.data(), v.data());
        }
    kv.commit(a, t);
    const SeqId b = kv.create_seq();
    REQUIRE(kv.attach_prefix(b, t) == 48);
    CHECK(kv.pool().ref_count(kv.block_table(b)[0]) == 2);  // attached by reference
    const std::vector<int32_t> shared(kv.block_table(b).begin(), kv.block_table(b).end());

    const auto copies = kv.unshare(b);
    REQUIRE(copies.size() == 3);
    CHECK(kv.seq_len(b) == 48);
    const auto table = kv.block_table(b);
    for (size_t i = 0; i < 3; ++i) {
        CHECK(copies[i].from == shared[i]);
        CHECK(copies[i].to == table[i]);
        CHECK(table[i] != kv.block_table(a)[i]);
        CHECK(kv.pool().ref_count(table[i]) == 1);
        CHECK(kv.pool().ref_count(shared[i]) == 1);  // a's alone again
        CHECK_FALSE(kv.pool().is_cached(table[i]));  // the original stays the cached one
        for (int l = 0; l < 2; ++l) {
            CHECK(std::memcmp(kv.k(l, table[i]), kv.k(l, shared[i]), size_t(kv.block_stride(l))) == 0);
            CHECK(std::memcmp(kv.v(l, table[i]), kv.v(l, shared[i]), size_t(kv.block_stride(l))) == 0);
        }
    }
    CHECK(kv.unshare(b).empty());  // nothing shared any more
    CHECK(kv.unshare(a).empty());  // a holds its blocks alone

    // A third sequence finds 2 free blocks of the 3 it needs: it keeps the first two blocks'
    // positions, copied, and gives up the third.
    const SeqId c = kv.create_seq();
    REQUIRE(kv.attach_prefix(c, t) == 48);
    CHECK(kv.pool().n_free() == 2);
    CHECK(kv.unshare(c).size() == 2);
    CHECK(kv.seq_len(c) == 32);
    CHECK(kv.block_table(c).size() == 2);
    for (int32_t blk : kv.block_table(c)) CHECK(kv.pool().ref_count(blk) == 1);
    // Its next positions are committed on top of the copies, as after a prefill of its own.
    kv.free_seq(b);
    REQUIRE(kv.reserve(c, 16));
    kv.commit(c, std::span(t).subspan(32, 16));
    CHECK(kv.seq_len(c) == 48);
}

TEST_CASE("kv cache: truncating into a shared block gives it up instead of writing it", "[unit][kv]") {
    KvCache kv(2, 256, 64, 16);
    const auto t = tokens(40);
    const SeqId a = kv.create_seq();
    REQUIRE(kv.reserve(a, 40));
    kv.commit(a, t);
    const SeqId b = kv.create_seq();
    REQUIRE(kv.attach_prefix(b, t) == 32);
    const int32_t shared = kv.block_table(a)[1];
    CHECK(kv.pool().ref_count(shared) == 2);
    // Position 20 is in block 1, which b also holds: a keeps only block 0.
    CHECK(kv.truncate_seq(a, 20) == 16);
    CHECK(kv.seq_len(a) == 16);
    CHECK(kv.pool().ref_count(shared) == 1);
    CHECK(kv.pool().is_cached(shared));
    // Into a block only it holds: kept, and no longer cached under its old tokens.
    CHECK(kv.truncate_seq(b, 20) == 20);
    CHECK_FALSE(kv.pool().is_cached(shared));
    kv.free_seq(b);
    kv.free_seq(a);
    CHECK(kv.pool().n_used() == 0);
}

TEST_CASE("kv cache: reserving past the context is a clear error", "[unit][kv]") {
    KvCache kv(1, 32, 64, 8);
    CHECK_THROWS_WITH(kv.reserve(kv.create_seq(), 33), Catch::Contains("context is full"));
}

TEST_CASE("kv cache: store converts rows to the cache's type where its block table says", "[unit][kv]") {
    constexpr int32_t kEmbd = 96, kLayers = 2, kPositions = 40;
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.0f, 2.0f);
    for (const DType type : {DType::F32, DType::F16, DType::BF16, DType::Q8_0}) {
        INFO(dtype_name(type));
        KvCache kv(kLayers, 64, kEmbd, 8, type);
        CHECK(kv.type() == type);
        // Bytes of a row: 4 or 2 per value, or 34 per 32 values for Q8_0.
        const int64_t want_row = type == DType::F32 ? 4 * kEmbd : type == DType::Q8_0 ? 34 * kEmbd / 32 : 2 * kEmbd;
        CHECK(kv.row_bytes() == want_row);
        CHECK(kv.block_stride(0) >= KvCache::kBlockSize * want_row);
        const SeqId s = kv.create_seq();
        REQUIRE(kv.reserve(s, kPositions));
        const auto table = kv.block_table(s);
        std::vector<float> k(size_t(kLayers) * kPositions * kEmbd), v(k.size());
        for (auto& x : k) x = nd(rng);
        for (auto& x : v) x = nd(rng);
        auto at = [&](int l, int p) { return (size_t(l) * kPositions + p) * kEmbd; };
        for (int l = 0; l < kLayers; ++l)
            for (int p = 0; p < kPositions; ++p)
                kv.store(l, table[p / KvCache::kBlockSize], p % KvCache::kBlockSize, &k[at(l, p)], &v[at(l, p)]);
        // Every row reads back (after all were written: none overwrote another) within the
        // type's rounding: exact, half an ulp (2^-11 or 2^-8 relative), half a Q8_0 step of
        // amax / 127 (values here stay below 10, five sigma; 0.6 leaves room for the f16 scale).
        auto bound = [&](float x) {
            switch (type) {
                case DType::F32: return 0.0;
                case DType::F16: return 0x1p-11 * std::abs(x);
                case DType::BF16: return 0x1p-8 * std::abs(x);
                default: return 0.6 * 10.0 / 127;
            }
        };
        double worst = 0;
        for (int l = 0; l < kLayers; ++l)
            for (int p = 0; p < kPositions; ++p) {
                const int32_t b = table[p / KvCache::kBlockSize];
                const std::byte* krow = kv.k(l, b) + (p % KvCache::kBlockSize) * kv.row_bytes();
                const std::byte* vrow = kv.v(l, b) + (p % KvCache::kBlockSize) * kv.row_bytes();
                for (int i = 0; i < kEmbd; ++i) {
                    const float want_k = k[at(l, p) + i], want_v = v[at(l, p) + i];
                    worst = std::max(worst, std::abs(test::kv_value(type, krow, i) - want_k) - bound(want_k));
                    worst = std::max(worst, std::abs(test::kv_value(type, vrow, i) - want_v) - bound(want_v));
                }
            }
        CHECK(worst <= 0);
    }
}

TEST_CASE("kv cache: a layer's bytes follow the type, blocks padded for O_DIRECT", "[unit][kv]") {
    // n_embd_kv 1024 (8 KV heads of 128): a block of 16 rows is 64 KiB in F32, 32 KiB in F16
    // and BF16, and 16 x 1088 = 17408 bytes in Q8_0, padded to 20 KiB.
    CHECK(KvCache::layer_bytes(10, 1024, DType::F32, false) == 2 * 10 * 65536);
    CHECK(KvCache::layer_bytes(10, 1024, DType::F16, false) == 2 * 10 * 32768);
    CHECK(KvCache::layer_bytes(10, 1024, DType::BF16, false) == 2 * 10 * 32768);
    CHECK(KvCache::layer_bytes(10, 1024, DType::Q8_0, false) == 2 * 10 * 20480);
    CHECK(KvCache::layer_bytes(10, 1024, DType::Q8_0, /*keys_only=*/true) == 10 * 20480);  // MLA
    // Resident layers need no O_DIRECT padding: SmolLM2's 192 values in F16 take 6 KiB a block.
    KvCache kv(3, 64, 192, 4, DType::F16);
    CHECK(kv.bytes() == 2ull * 3 * 4 * 16 * 192 * 2);
}

TEST_CASE("kv cache: some layers' bytes are their K/V rows or saved hidden states, and the pair rebuilt ones share, once",
          "[unit][kv]") {
    KvSpillOptions o;
    o.n_resident_layers = 4;
    o.rebuilt = {false, true, false, true};
    o.n_embd_hidden = 576;
    KvCache kv(4, 64, 192, o, 4, DType::F16);
    // 4 blocks of 16 rows: 192 values in F16 a row for K and for V, 576 for a saved hidden state.
    const uint64_t pair = 2ull * 4 * 16 * 192 * 2, hidden = 4ull * 16 * 576 * 2;
    CHECK(kv.layers_bytes({false, false, false, false}) == 0);
    CHECK(kv.layers_bytes({true, false, true, false}) == 2 * pair);
    CHECK(kv.layers_bytes({false, true, false, false}) == hidden + pair);
    CHECK(kv.layers_bytes({false, true, false, true}) == 2 * hidden + pair);
    CHECK(kv.layers_bytes({true, true, true, true}) == kv.bytes());
    CHECK(kv.layers_bytes({true, true}) == pair + hidden + pair);  // layers past the vector's end are not counted
    // As a layout counts them before the cache exists, from the sizes it makes the cache with.
    const uint64_t kept = KvCache::resident_layer_bytes(4, 192, DType::F16, false);
    const uint64_t saved = KvCache::hidden_layer_bytes(4, 576, DType::F16);
    for (const std::vector<bool>& layers : {std::vector<bool>{true, false, true, false}, {false, true, false, true}, {true, true, true, true}})
        CHECK(KvCache::layers_bytes(layers, o.rebuilt, kept, saved) == kv.layers_bytes(layers));
    // Keys only (MLA): one row a position.
    KvSpillOptions keys;
    keys.n_resident_layers = 3;
    keys.keys_only = true;
    KvCache mla(3, 64, 192, keys, 4, DType::F16);
    CHECK(KvCache::layers_bytes({true, false, true}, {}, KvCache::resident_layer_bytes(4, 192, DType::F16, true), 0) ==
          mla.layers_bytes({true, false, true}));
    CHECK(mla.layers_bytes({true, false, true}) == 2ull * 4 * 16 * 192 * 2);
}

TEST_CASE("kv cache: a type it cannot hold is a clear error", "[unit][kv]") {
    CHECK_THROWS_WITH(KvCache(1, 32, 48, 0, DType::Q8_0), Catch::Contains("blocks of 32 values") && Catch::Contains("48"));
    CHECK_THROWS_WITH(KvCache(1, 32, 64, 0, DType::Q4_K), Catch::Contains("Q4_K is not a KV cache type"));
    CHECK_THROWS_WITH(KvCache(1, 32, 48, 0, DType::Q4_0), Catch::Contains("blocks of 32 values") && Catch::Contains("48"));
    CHECK_THROWS_AS(KvCache::layer_bytes(4, 48, DType::Q8_0, false), UsageError);
}

TEST_CASE("kv cache: keys only (MLA) keeps one row per position, read as keys and values, in half the memory",
          "[unit][kv]") {
    KvSpillOptions both, keys;
    both.n_resident_layers = keys.n_resident_layers = 2;
    keys.keys_only = true;
    KvCache kv_both(2, 64, 40, both), kv_keys(2, 64, 40, keys);
    CHECK(kv_keys.bytes() * 2 == kv_both.bytes());
    const SeqId seq = kv_keys.create_seq();
    kv_keys.reserve(seq, 1);
    const int32_t block = kv_keys.block_table(seq)[0];
    std::vector<float> row(40), ignored(40, -1.0f), back(40);
    for (size_t i = 0; i < row.size(); ++i) row[i] = 0.25f * float(i);
    kv_keys.store(1, block, 3, row.data(), ignored.data());
    CHECK(kv_keys.v(1, block) == kv_keys.k(1, block));
    std::memcpy(back.data(), kv_keys.k(1, block) + 3 * kv_keys.row_bytes(), 40 * sizeof(float));
    CHECK(back == row);
}

namespace {
// A cache of five layers, the first in DRAM, the others spilled to disk (more than its ring of two
// buffers holds: some reads are issued only in the next pass), with rows that name their layer
// and a tag; passes over it begin each layer in turn as a backend does.
struct SpilledCache {
    static constexpr int kLayers = 5, kDim = 32;
    KvCache kv;
    explicit SpilledCache(int32_t n_blocks) : kv(kLayers, 256, kDim, options(), n_blocks, DType::F32) {}
    static KvSpillOptions options() {
        KvSpillOptions o;
        o.n_resident_layers = 1;
        o.dir = test::temp_path("keep_path_spill");
        o.prefetch_depth = 1;
        return o;
    }
    static float value(int layer, float tag) { return 1000.0f * float(layer) + tag; }

    struct Row {
        SeqId seq;
        int pos;
        float tag;
    };
    // One pass: each layer begun, `writes` stored, `reads` checked, the written blocks written back.
    void pass(const std::vector<Row>& writes, const std::vector<Row>& reads) {
        std::vector<int32_t> dirty;
        for (const Row& w : writes) dirty.push_back(kv.block_table(w.seq)[size_t(w.pos / KvCache::kBlockSize)]);
        std::sort(dirty.begin(), dirty.end());
        dirty.erase(std::unique(dirty.begin(), dirty.end()), dirty.end());
        std::vector<float> k(kDim), v(kDim);
        for (int l = 0; l < kLayers; ++l) {
            kv.begin_layer(l);
            for (const Row& w : writes) {
                std::fill(k.begin(), k.end(), value(l, w.tag));
                std::fill(v.begin(), v.end(), -value(l, w.tag));
                kv.store(l, kv.block_table(w.seq)[size_t(w.pos / KvCache::kBlockSize)], w.pos % KvCache::kBlockSize, k.data(), v.data());
            }
            for (const Row& r : reads) {
                INFO("layer " << l << ", sequence " << r.seq << ", position " << r.pos);
                const int32_t block = kv.block_table(r.seq)[size_t(r.pos / KvCache::kBlockSize)];
                const int64_t at = (r.pos % KvCache::kBlockSize) * kv.row_bytes();
                CHECK(test::kv_value(DType::F32, kv.k(l, block) + at, kDim - 1) == value(l, r.tag));
                CHECK(test::kv_value(DType::F32, kv.v(l, block) + at, 0) == -value(l, r.tag));
            }
            kv.end_layer(l, dirty);
        }
    }
    // A sequence's positions [from, to) with tags tag0 + their offset from `from`.
    static std::vector<Row> rows(SeqId seq, int from, int to, float tag0) {
        std::vector<Row> out;
        for (int p = from; p < to; ++p) out.push_back({seq, p, tag0 + float(p - from)});
        return out;
    }
    static std::vector<Row> join(std::vector<Row> a, const std::vector<Row>& b) {
        a.insert(a.end(), b.begin(), b.end());
        return a;
    }
};
}  // namespace

TEST_CASE("kv cache: a kept draft path's rows read back at their positions in spilled layers, batched", "[unit][kv][spec]") {
    SpilledCache c(5);  // a and b take two blocks each: c can only reuse the one a gives back
    KvCache& kv = c.kv;
    REQUIRE(kv.n_spilled() == 4);
    const SeqId a = kv.create_seq(), b = kv.create_seq();
    REQUIRE(kv.reserve(a, 10));
    REQUIRE(kv.reserve(b, 20));
    c.pass(SpilledCache::join(SpilledCache::rows(a, 0, 10, 0), SpilledCache::rows(b, 0, 20, 500)), {});
    kv.commit(a, tokens(10, 1));
    kv.commit(b, tokens(20, 2));
    // Draft trees in one pass: a's 20 slots from position 10 (into its second block), b's 12 from 20.
    REQUIRE(kv.reserve(a, 20));
    REQUIRE(kv.reserve(b, 12));
    c.pass(SpilledCache::join(SpilledCache::rows(a, 10, 30, 100), SpilledCache::rows(b, 20, 32, 200)), {});
    const int32_t given_back = kv.block_table(a)[1];
    const std::vector<int64_t> a_slots{0, 3, 7, 12}, b_slots{0, 1, 5, 9, 11};
    kv.keep_path(a, a_slots, tokens(4, 3));
    kv.keep_path(b, b_slots, tokens(5, 4));
    REQUIRE(kv.block_table(a).size() == 1);  // slot 12's block went back to the pool, its row still to move
    std::vector<SpilledCache::Row> want = SpilledCache::join(SpilledCache::rows(a, 0, 10, 0), SpilledCache::rows(b, 0, 20, 500));
    for (size_t i = 0; i < a_slots.size(); ++i) want.push_back({a, 10 + int(i), 100.0f + float(a_slots[i])});
    for (size_t i = 0; i < b_slots.size(); ++i) want.push_back({b, 20 + int(i), 200.0f + float(b_slots[i])});

    // The next pass: a new sequence takes the block given back and writes it; the moves come first.
    const SeqId fresh = kv.create_seq();
    REQUIRE(kv.reserve(fresh, 32));
    const auto table = kv.block_table(fresh);
    REQUIRE(std::find(table.begin(), table.end(), given_back) != table.end());
    const auto fresh_rows = SpilledCache::rows(fresh, 0, 32, 300);
    c.pass(fresh_rows, SpilledCache::join(want, fresh_rows));
    // And as written back to the file.
    c.pass({}, SpilledCache::join(want, fresh_rows));
    for (const SeqId s : {a, b, fresh}) kv.free_seq(s);
    CHECK(kv.pool().n_used() == 0);
}

TEST_CASE("kv cache: a kept path's rows move in spilled layers after its sequence is freed, for a prefix attached", "[unit][kv][spec]") {
    SpilledCache c(4);
    KvCache& kv = c.kv;
    const SeqId d = kv.create_seq();
    REQUIRE(kv.reserve(d, 20));
    c.pass(SpilledCache::rows(d, 0, 20, 0), {});  // a prompt of 10, then a tree of 10 slots
    kv.commit(d, tokens(10, 5));
    const std::vector<int64_t> slots{0, 1, 2, 4, 6, 9};
    const auto path = tokens(6, 6);
    kv.keep_path(d, slots, path);  // fills the first block: it is published in the prefix cache
    kv.free_seq(d);  // before any layer is begun again

    auto text = tokens(10, 5);
    text.insert(text.end(), path.begin(), path.end());
    text.push_back(7);
    const SeqId e = kv.create_seq();
    REQUIRE(kv.attach_prefix(e, text) == 16);
    std::vector<SpilledCache::Row> want = SpilledCache::rows(e, 0, 10, 0);
    for (size_t i = 0; i < slots.size(); ++i) want.push_back({e, 10 + int(i), float(10 + slots[i])});
    c.pass({}, want);
    kv.free_seq(e);
}

TEST_CASE("kv cache: pin_resident registers every resident layer's K and V for the cache's life, once", "[unit][kv]") {
    const auto pinner = std::make_shared<RecordingPinner>();
    {
        KvCache kv(3, 256, 64, 8);
        CHECK(kv.pin_resident(nullptr) == 0);
        CHECK(kv.pin_resident(pinner) == kv.bytes());
        CHECK(pinner->live.size() == 2);  // K and V
        for (int32_t il = 0; il < 3; ++il)
            for (int32_t b = 0; b < kv.pool().n_blocks(); ++b) {
                INFO("layer " << il << ", block " << b);
                CHECK(pinner->covers(kv.k(il, b), size_t(kv.block_stride(il))));
                CHECK(pinner->covers(kv.v(il, b), size_t(kv.block_stride(il))));
            }
        CHECK(kv.pin_resident(pinner) == 0);  // already pinned: not registered twice
        CHECK(pinner->calls == 2);
    }
    CHECK(pinner->live.empty());  // released with the cache
}

TEST_CASE("kv cache: a pinner refusing the KV cache leaves none of it registered", "[unit][kv]") {
    const auto pinner = std::make_shared<RecordingPinner>();
    pinner->refuse = 2;  // K registers, V is refused: K is given back
    KvCache kv(2, 256, 64, 8);
    CHECK(kv.pin_resident(pinner) == 0);
    CHECK(pinner->live.empty());
}
