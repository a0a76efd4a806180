// The device interface's draft-tree ops, on every device: attention of a draft tree's rows
// through their masks matches cpu::attention's tree attention (with and without a window that
// drops ancestors), beside a causal row of another sequence; kv_move moves whole rows in order.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "cpu/attention_cpu.h"
#include "cpu/kv_format.h"
#include "gpu/device.h"
#include "tests/support/random_values.h"
#include "tests/unit/gpu/device_test_support.h"

using namespace strata;
using namespace strata::gpu;
using namespace strata::gpu::test;
using strata::test::normal_floats;

namespace {

constexpr int32_t kBase = 40;  // the sequence's length before the tree
// Root at slot 0; node 1 its first child (slot 1), node 2 its second (branch 1: slot 17); node 3
// under node 1 (slot 2), node 4 under node 2 (slot 18). Slots from kBase, positions, ancestor masks.
const std::vector<int64_t> kSlot{0, 1, 17, 2, 18}, kDepth{0, 1, 1, 2, 2};
const std::vector<uint64_t> kMask{0b1, 0b11, (1u << 17) | 1u, 0b111, (3u << 17) | 1u};

void tree_attention(TestDevice& d, DType kv_type, int32_t window) {
    const int32_t n_tree = 5, n_rows = n_tree + 1, n_head = 6, n_head_kv = 2, head_dim = 64, bs = kKvBlockSize;
    const int32_t n_blocks = 6, max_blocks = 4;
    const int64_t row_values = int64_t{n_head_kv} * head_dim;
    const int64_t row_stride = int64_t(row_bytes(kv_type, row_values)), block_stride = bs * row_stride;
    const auto kf = normal_floats(n_blocks * bs * row_values, 81), vf = normal_floats(n_blocks * bs * row_values, 82);
    std::vector<uint8_t> k(n_blocks * block_stride), v(k.size());
    for (int64_t r = 0; r < n_blocks * bs; ++r) {
        cpu::store_kv_row(kv_type, &kf[r * row_values], &k[r * row_stride], row_values);
        cpu::store_kv_row(kv_type, &vf[r * row_values], &v[r * row_stride], row_values);
    }
    // The tree's sequence in blocks 5, 0, 3, 1; the last row a causal one of another sequence (blocks 2, 4).
    const std::vector<int32_t> tree_table{5, 0, 3, 1}, other_table{2, 4, 0, 0};
    std::vector<int32_t> tables, n_kv, base, pos;
    std::vector<uint64_t> mask;
    for (int32_t t = 0; t < n_tree; ++t) {
        tables.insert(tables.end(), tree_table.begin(), tree_table.end());
        n_kv.push_back(kBase + int32_t(kSlot[t]) + 1);
        base.push_back(kBase);
        pos.push_back(kBase + int32_t(kDepth[t]));
        mask.push_back(kMask[t]);
    }
    tables.insert(tables.end(), other_table.begin(), other_table.end());
    n_kv.push_back(29);
    base.push_back(29);
    pos.push_back(28);
    mask.push_back(0);
    const auto q = normal_floats(n_rows * n_head * head_dim, 83, 2.0f);
    const size_t out_values = size_t(n_rows) * n_head * head_dim;
    DeviceBuffer dk = d.upload(k), dv = d.upload(v), dq = d.upload(q), dt = d.upload(tables), dn = d.upload(n_kv);
    DeviceBuffer db = d.upload(base), dp = d.upload(pos), dm = d.upload(mask);
    DeviceBuffer dout = d.upload(std::vector<float>(out_values, std::nanf("")));
    DeviceBuffer scratch = d.zeros(std::max<size_t>(1, d.dev->attention_scratch_floats(n_rows, n_head, head_dim, max_blocks)) * 4);
    const DecodeAttentionArgs a{.q = dq.as<float>(), .out = dout.as<float>(), .k = dk.data(), .v = dv.data(),
                                .kv_type = kv_type, .block_tables = dt.as<int32_t>(), .n_kv = dn.as<int32_t>(),
                                .n_seq = n_rows, .max_blocks = max_blocks, .n_head = n_head, .n_head_kv = n_head_kv,
                                .head_dim = head_dim, .row_stride = row_stride, .block_stride = block_stride,
                                .scratch = scratch.as<float>(), .window = window, .tree_mask = dm.as<uint64_t>(),
                                .tree_base = db.as<int32_t>(), .pos = dp.as<int32_t>(), .tree_words = 1};
    d.dev->decode_attention(a, *d.stream);
    const auto out = d.download<float>(dout, out_values);

    // The CPU's tree attention for the tree's rows, plain attention for the causal one.
    std::vector<float> ref(out_values);
    std::vector<int64_t> slot, tree_pos, key_pos(64, -1);
    for (int32_t t = 0; t < n_tree; ++t) {
        slot.push_back(kBase + kSlot[t]);
        tree_pos.push_back(kBase + kDepth[t]);
        key_pos[size_t(kSlot[t])] = kBase + kDepth[t];
    }
    const cpu::AttentionTree tree{kBase, slot.data(), tree_pos.data(), key_pos.data(), kMask.data(), 1};
    for (const bool is_tree : {true, false}) {
        cpu::AttentionArgs c;
        c.tree = is_tree ? &tree : nullptr;
        c.q = q.data() + (is_tree ? 0 : n_tree * n_head * head_dim);
        c.out = ref.data() + (is_tree ? 0 : n_tree * n_head * head_dim);
        c.k = k.data();
        c.v = v.data();
        c.n_tokens = is_tree ? n_tree : 1;
        c.pos0 = is_tree ? 0 : 28;
        c.n_head = n_head;
        c.n_head_kv = n_head_kv;
        c.head_dim = head_dim;
        c.kv_stride = row_stride;
        c.kv_type = kv_type;
        c.block_table = is_tree ? tree_table.data() : other_table.data();
        c.block_size = bs;
        c.block_stride = block_stride;
        c.window = window;
        cpu::attention(c);
    }
    const bool sim = d.dev->name() == "sim";
    int64_t bad = 0;
    for (size_t i = 0; i < ref.size(); ++i) bad += sim ? out[i] != ref[i] : !(std::abs(out[i] - ref[i]) <= 1e-4 * (std::abs(ref[i]) + 1.0));
    CHECK(bad == 0);
}

void tree_rows(TestDevice& d) {
    // Window 2: node 3 (position 42) no longer sees the root (40), nor node 4 its root.
    for (const DType kv_type : {DType::F32, DType::F16, DType::Q8_0})
        for (const int32_t window : {0, 2, 20}) {
            if (!d.dev->supports_kv(kv_type)) continue;
            INFO(d.dev->name() << ", KV " << dtype_name(kv_type) << ", window " << window);
            tree_attention(d, kv_type, window);
        }
}

// A draft tree as its rows see it: per node its slot and depth from the tree's first, and its
// mask over the slots (`words` words a node).
struct TreeShape {
    std::vector<int64_t> slot, depth;
    std::vector<uint64_t> mask;
    int32_t words = 1;
    int32_t n() const { return int32_t(slot.size()); }
};
TreeShape small_tree() { return {kSlot, kDepth, kMask, 1}; }
// A chain of 70 nodes, then a node under the fourth: its fifth key is slot 70, in the masks'
// second word.
TreeShape two_word_tree() {
    TreeShape t;
    t.words = 2;
    for (int64_t i = 0; i <= 70; ++i) {
        const int64_t depth = i < 70 ? i : 4;
        t.slot.push_back(i), t.depth.push_back(depth);
        uint64_t w[2] = {0, 0};
        for (int64_t b = 0; b <= std::min<int64_t>(i, 3); ++b) w[0] |= uint64_t{1} << b;
        for (int64_t b = 4; b <= i && i < 70; ++b) w[b / 64] |= uint64_t{1} << (b % 64);
        if (i == 70) w[1] |= uint64_t{1} << (70 - 64);
        t.mask.insert(t.mask.end(), w, w + 2);
    }
    return t;
}

// Each tree row gets, bit for bit, what plain decoding at its position gets: a causal row over
// a sequence whose positions hold the tree's keys before the tree, then the node's ancestors'
// and its own in order (copied into blocks of its own). No window, one of 2 positions (the
// deeper nodes lose the root) and one of 100 (the keys before the tree partly dropped); a tree
// at position 120 whose slots cross into later splits (of 16 keys at that depth,
// gpu/kernels/decode_splits.h) than its positions, and one whose masks take two words.
void tree_as_plain(TestDevice& d, const TreeShape& shape, DType kv_type, int32_t window) {
    const int32_t n_tree = shape.n(), n_head = 8, n_head_kv = 2, head_dim = 64, bs = kKvBlockSize, base = 120;
    const int64_t last_slot = *std::max_element(shape.slot.begin(), shape.slot.end());
    const int32_t max_blocks = int32_t((base + last_slot + bs) / bs), tree_blocks = max_blocks;
    const int32_t n_blocks = tree_blocks * (1 + n_tree);
    const int64_t row_values = int64_t{n_head_kv} * head_dim;
    const int64_t row_stride = int64_t(row_bytes(kv_type, row_values)), block_stride = bs * row_stride;
    const auto kf = normal_floats(tree_blocks * bs * row_values, 91), vf = normal_floats(tree_blocks * bs * row_values, 92);
    std::vector<uint8_t> k(size_t(n_blocks * block_stride)), v(k.size());
    // The tree's sequence in blocks 0 to tree_blocks - 1 (slot s in block s / 16); node t's plain
    // sequence in the tree_blocks blocks from tree_blocks (t + 1) on, its position p holding the
    // tree sequence's slot for p.
    for (int64_t r = 0; r < tree_blocks * bs; ++r) {
        cpu::store_kv_row(kv_type, &kf[r * row_values], &k[r * row_stride], row_values);
        cpu::store_kv_row(kv_type, &vf[r * row_values], &v[r * row_stride], row_values);
    }
    std::vector<int32_t> tables, n_kv, tree_base, pos, plain_tables, plain_n_kv;
    for (int32_t t = 0; t < n_tree; ++t) {
        for (int32_t b = 0; b < max_blocks; ++b) tables.push_back(b), plain_tables.push_back(tree_blocks * (t + 1) + b);
        n_kv.push_back(base + int32_t(shape.slot[t]) + 1);
        tree_base.push_back(base);
        pos.push_back(base + int32_t(shape.depth[t]));
        plain_n_kv.push_back(pos.back() + 1);
        const uint64_t* mask = &shape.mask[size_t(t) * size_t(shape.words)];
        for (int64_t p = 0; p <= pos.back(); ++p) {
            int64_t slot = p;  // the k-th set bit of the mask from the tree's first slot
            for (int64_t i = 0, seen = 0; p >= base && i < 64 * shape.words; ++i)
                if (mask[i / 64] >> (i % 64) & 1 && seen++ == p - base) slot = base + i;
            const int64_t to = (tree_blocks * (t + 1)) * bs + p;
            std::copy_n(&k[slot * row_stride], row_stride, &k[to * row_stride]);
            std::copy_n(&v[slot * row_stride], row_stride, &v[to * row_stride]);
        }
    }
    const auto q = normal_floats(n_tree * n_head * head_dim, 93, 2.0f);
    const size_t out_values = size_t(n_tree) * n_head * head_dim;
    DeviceBuffer dk = d.upload(k), dv = d.upload(v), dq = d.upload(q);
    DeviceBuffer scratch = d.zeros(std::max<size_t>(1, d.dev->attention_scratch_floats(n_tree, n_head, head_dim, max_blocks)) * 4);
    auto attend = [&](const std::vector<int32_t>& table, const std::vector<int32_t>& keys, bool tree) {
        DeviceBuffer dt = d.upload(table), dn = d.upload(keys), db = d.upload(tree_base), dp = d.upload(pos), dm = d.upload(shape.mask);
        DeviceBuffer dout = d.upload(std::vector<float>(out_values, std::nanf("")));
        DecodeAttentionArgs a{.q = dq.as<float>(), .out = dout.as<float>(), .k = dk.data(), .v = dv.data(),
                              .kv_type = kv_type, .block_tables = dt.as<int32_t>(), .n_kv = dn.as<int32_t>(),
                              .n_seq = n_tree, .max_blocks = max_blocks, .n_head = n_head, .n_head_kv = n_head_kv,
                              .head_dim = head_dim, .row_stride = row_stride, .block_stride = block_stride,
                              .scratch = scratch.as<float>(), .window = window};
        if (tree) a.tree_mask = dm.as<uint64_t>(), a.tree_base = db.as<int32_t>(), a.pos = dp.as<int32_t>(), a.tree_words = shape.words;
        d.dev->decode_attention(a, *d.stream);
        return d.download<float>(dout, out_values);
    };
    const auto as_tree = attend(tables, n_kv, true), as_plain = attend(plain_tables, plain_n_kv, false);
    for (int32_t t = 0; t < n_tree; ++t) {
        INFO("node " << t);
        const size_t at = size_t(t) * n_head * head_dim, end = at + size_t(n_head) * head_dim;
        CHECK(std::equal(as_tree.begin() + at, as_tree.begin() + end, as_plain.begin() + at));
    }
}

void tree_rows_as_plain(TestDevice& d) {
    for (const DType kv_type : {DType::F16, DType::Q8_0})
        for (const int32_t window : {0, 2, 100}) {
            if (!d.dev->supports_kv(kv_type)) continue;
            INFO(d.dev->name() << ", KV " << dtype_name(kv_type) << ", window " << window);
            tree_as_plain(d, small_tree(), kv_type, window);
        }
    INFO(d.dev->name() << ", masks of two words");
    tree_as_plain(d, two_word_tree(), DType::F16, 0);
}

void moved_rows(TestDevice& d) {
    const int64_t n = 64, row_stride = int64_t(row_bytes(DType::F16, n)), bs = kKvBlockSize, n_blocks = 3;
    std::vector<uint8_t> cache(size_t(n_blocks * bs * row_stride));
    std::iota(cache.begin(), cache.end(), uint8_t{0});
    DeviceBuffer dc = d.upload(cache);
    // Rows 14, 15 of block 2 to its rows 1, 2 (next to each other: one copy), then row 3 of block
    // 0 to row 3 of block 2.
    const std::vector<int32_t> from_block{2, 2, 0}, from_row{14, 15, 3}, to_block{2, 2, 2}, to_row{1, 2, 3};
    const KvRows from{dc.data(), DType::F16, from_block.data(), from_row.data(), 3, n, row_stride, bs * row_stride};
    KvRows to = from;
    to.block = to_block.data();
    to.row = to_row.data();
    d.dev->kv_move(from, to, *d.stream);
    std::vector<uint8_t> want = cache;
    for (size_t i = 0; i < 3; ++i)
        std::copy_n(&cache[size_t((from_block[i] * bs + from_row[i]) * row_stride)], size_t(row_stride),
                    &want[size_t((to_block[i] * bs + to_row[i]) * row_stride)]);
    CHECK(d.download<uint8_t>(dc, cache.size()) == want);
}

}  // namespace

STRATA_DEVICE_TEST("a draft tree's rows attend through their masks as cpu::attention's tree attention, windows included",
                   tree_rows)
STRATA_DEVICE_TEST("a draft tree's rows get plain decoding's bits at their positions", tree_rows_as_plain)
STRATA_DEVICE_TEST("kv_move copies whole KV rows in order, runs of rows as one", moved_rows)
