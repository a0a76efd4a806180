#include "cpu/attention_cpu.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "core/kernel_shapes.h"
#include "cpu/cpu_features.h"
#include "cpu/attention_tile_loop.h"
#include "cpu/gemm_x86.h"
#include "cpu/kv_format.h"
#include "cpu/quant_ref.h"
#include "cpu/thread_pool.h"

namespace strata::cpu {

namespace {
// The reference's inner loops, in plain C++.
struct PlainOps {
    static void scores(const float* const* q, int m, const float* const* keys, int nb, int32_t hd, float* s, int64_t ld) {
        for (int i = 0; i < m; ++i)
            for (int k = 0; k < nb; ++k) {
                float dot = 0;
                for (int32_t d = 0; d < hd; ++d) dot += q[i][d] * keys[k][d];
                s[i * ld + k] = dot;
            }
    }
    static float max(const float* s, int64_t n) {
        float mx = -INFINITY;
        for (int64_t j = 0; j < n; ++j) mx = std::max(mx, s[j]);
        return mx;
    }
    static void exp(float* s, int64_t n, float mx) {
        for (int64_t j = 0; j < n; ++j) s[j] = std::exp(s[j] - mx);
    }
    static float sum(const float* e, int64_t n) {
        float sum = 0;
        for (int64_t j = 0; j < n; ++j) sum += e[j];
        return sum;
    }
    static void weigh(const float* s, float scale, const float* const* values, int nb, float* o, int32_t n) {
        for (int k = 0; k < nb; ++k) {
            const float w = s[k] * scale;
            for (int32_t d = 0; d < n; ++d) o[d] += w * values[k][d];
        }
    }
};
}  // namespace

void attention_tile_ref(const AttentionTile& t) { detail::attention_tile_loop<PlainOps>(t); }

void softcap_scores(float* s, int64_t n, float cap) {
    const float inv = 1.0f / cap;
    for (int64_t j = 0; j < n; ++j) s[j] = cap * std::tanh(s[j] * inv);
}

namespace {

// How one AttentionArgs is cut into tasks: (KV head, tile of tokens, part of the keys).
struct Cut {
    const AttentionArgs* a = nullptr;
    int32_t group = 1, v_dim = 0;
    float scale = 1;
    int64_t tok = 1, n_tiles = 1, parts = 1;  // tokens per tile, tiles, key parts (1: not split)
    bool simd = false;
    int64_t first_task = 0;    // its first task in the batch's loop
    float* partial = nullptr;  // parts > 1: n_tokens x n_head x parts rows of v_dim + 2 floats
    int64_t tasks() const { return int64_t(a->n_head_kv) * n_tiles * parts; }
    int64_t partial_floats() const { return parts > 1 ? a->n_tokens * a->n_head * parts * (v_dim + 2) : 0; }
    float* partial_row(int64_t t, int32_t h, int64_t part) const {
        return partial + ((t * a->n_head + h) * parts + part) * (v_dim + 2);
    }
};

bool decode_rows(const AttentionArgs& a) {
    return a.rows == AttentionRows::Decode || (a.rows == AttentionRows::ByCount && a.n_tokens < kAttentionSplitTokens);
}

Cut cut_of(const AttentionArgs& a) {
    if (!is_kv_type(a.kv_type))
        throw UsageError(fmt::format("{} is not a KV cache type", dtype_name(a.kv_type)),
                         fmt::format("use one of {}", kKvTypeList));
    Cut c;
    c.a = &a;
    c.v_dim = a.v_dim();
    if (c.v_dim > a.head_dim)
        throw UsageError(fmt::format("value heads of {} values are wider than key heads of {}", c.v_dim, a.head_dim),
                         "only narrower value heads are supported (MLA: the latent part of the key rows)");
    STRATA_ASSERT(!a.block_table || (a.block_size > 0 && a.block_size % 16 == 0));
    STRATA_ASSERT(traits(a.kv_type).block_elems == 1 || (static_cast<int64_t>(a.n_head_kv) * a.head_dim) % kQK == 0);
    c.group = a.n_head / a.n_head_kv;
    c.scale = a.scale > 0 ? a.scale : 1.0f / std::sqrt(static_cast<float>(a.head_dim));
    // Query rows per tile: all `group` heads of a KV head for `tok` tokens, at most kAttentionTileRows.
    c.tok = std::max<int64_t>(1, kAttentionTileRows / c.group);
    c.n_tiles = (a.n_tokens + c.tok - 1) / c.tok;
    // Decode rows split by their keys; a verify pass's too, however many, as a decode step
    // computes each of them. A draft tree's nodes lie at slots, not positions: parts cut at
    // slots sum them as the chain a node stands for only where the tree's slots (and so those
    // chains' positions) lie in one part; a tree across a boundary stays whole.
    const bool decode = decode_rows(a);
    const int64_t K = kAttentionSplitKeys;
    if (decode && !a.tree) {
        c.parts = (a.pos0 + a.n_tokens + K - 1) / K;
    } else if (decode) {
        const int64_t end = *std::max_element(a.tree->slot, a.tree->slot + a.n_tokens) + 1;
        if (a.tree->base / K == (end - 1) / K) c.parts = (end + K - 1) / K;
    }
    c.simd = active_path() == CpuPath::Avx512 && a.head_dim % 16 == 0 && c.v_dim % 16 == 0 &&
             a.head_dim <= kMaxSimdHeadDim && c.group <= 512;
    return c;
}

// One task: KV head hk's query rows of token tile `tile` against the keys of part `part` (all of
// them when the rows are not split).
void run_task(const Cut& c, int32_t hk, int64_t tile_i, int64_t part) {
    const AttentionArgs& a = *c.a;
    const int64_t t0 = tile_i * c.tok, t1 = std::min(a.n_tokens, t0 + c.tok);
    const int m = static_cast<int>((t1 - t0) * c.group);
    const AttentionTree* tree = a.tree;
    const bool split = c.parts > 1;
    const int64_t key_lo = split ? part * kAttentionSplitKeys : 0;
    const int64_t key_hi = split ? key_lo + kAttentionSplitKeys : INT64_MAX;
    const int64_t q_stride = static_cast<int64_t>(a.n_head) * a.head_dim, o_stride = static_cast<int64_t>(a.n_head) * c.v_dim;
    // A tree's rows end at their slots, in no particular order.
    int64_t n_kv_max = std::min(a.pos0 + t1, key_hi);
    if (tree) n_kv_max = std::min(*std::max_element(tree->slot + t0, tree->slot + t1) + 1, key_hi);
    // Scratch: the scaled query rows, row pointers, key counts and tokens, then the scores.
    auto align = [](size_t n) { return (n + 63) & ~size_t{63}; };
    const size_t q_bytes = align(sizeof(float) * m * a.head_dim), p_bytes = align(sizeof(void*) * m),
                 n_bytes = align(sizeof(int64_t) * m), s_bytes = align(sizeof(float) * m);
    uint8_t* buf = thread_scratch(3, q_bytes + 2 * p_bytes + 3 * n_bytes + s_bytes + sizeof(float) * m * (n_kv_max + 16));
    auto* qs = reinterpret_cast<float*>(buf);
    auto** qrows = reinterpret_cast<const float**>(buf + q_bytes);
    auto** orows = reinterpret_cast<float**>(buf + q_bytes + p_bytes);
    auto* nrows = reinterpret_cast<int64_t*>(buf + q_bytes + 2 * p_bytes);
    auto* firsts = reinterpret_cast<int64_t*>(buf + q_bytes + 2 * p_bytes + n_bytes);
    auto* tokens = reinterpret_cast<int64_t*>(buf + q_bytes + 2 * p_bytes + 2 * n_bytes);
    auto* sinks = reinterpret_cast<float*>(buf + q_bytes + 2 * p_bytes + 3 * n_bytes);
    auto* scores = reinterpret_cast<float*>(buf + q_bytes + 2 * p_bytes + 3 * n_bytes + s_bytes);
    int r = 0;
    for (int64_t t = t0; t < t1; ++t)
        for (int32_t g = 0; g < c.group; ++g, ++r) {
            const int32_t h = hk * c.group + g;
            const float* src = a.q + t * q_stride + static_cast<int64_t>(h) * a.head_dim;
            float* dst = qs + static_cast<int64_t>(r) * a.head_dim;
            for (int32_t d = 0; d < a.head_dim; ++d) dst[d] = src[d] * c.scale;
            qrows[r] = dst;
            orows[r] = split ? c.partial_row(t, h, part) : a.out + t * o_stride + static_cast<int64_t>(h) * c.v_dim;
            nrows[r] = std::min(tree ? tree->slot[t] + 1 : a.pos0 + t + 1, key_hi);
            // A window counts back from the row's position (a tree's mask drops the nodes before it).
            const int64_t pos = tree ? tree->pos[t] : a.pos0 + t;
            firsts[r] = std::max(a.window > 0 ? std::max<int64_t>(0, pos + 1 - a.window) : 0, key_lo);
            tokens[r] = t;
            if (a.sinks) sinks[r] = a.sinks[h];
        }
    AttentionTile tile{qrows, orows, nrows, firsts, m, n_kv_max};
    tile.k = static_cast<const std::byte*>(a.k);
    tile.v = static_cast<const std::byte*>(a.v);
    tile.col0 = static_cast<int64_t>(hk) * a.head_dim;
    tile.v_col0 = static_cast<int64_t>(hk) * c.v_dim;
    tile.kv_stride = a.kv_stride;
    tile.kv_type = a.kv_type;
    tile.head_dim = a.head_dim;
    tile.v_dim = c.v_dim;
    tile.sinks = a.sinks && !split ? sinks : nullptr;  // a split row's sink joins at the merge
    tile.partial = split;
    tile.scores = scores;
    // Causal rows come in position order: the first sees the earliest key.
    tile.j_begin = (tree ? *std::min_element(firsts, firsts + m) : firsts[0]) / 16 * 16;
    tile.tree = tree;
    tile.tokens = tokens;
    tile.softcap = a.softcap;
    tile.blocks = a.block_table;
    tile.block_size = a.block_table ? a.block_size : (n_kv_max + 15) / 16 * 16;
    tile.block_stride = a.block_stride;
    // The few query heads a KV head of decode rows split over their keys: scored directly. The
    // rows split are those whose rounding already depends on their kind (fewer than
    // kAttentionSplitTokens tokens, past kAttentionSplitKeys keys), never on the tile's size;
    // every other row keeps the transposed path's bits.
    tile.direct_scores = split && c.group < 8 && a.head_dim <= kMaxDirectHeadDim;
    if (c.simd) attention_tile_avx512(tile);
    else if (active_path() != CpuPath::Scalar) attention_tile_avx2(tile);  // an AVX-512 CPU runs AVX2 too
    else attention_tile_ref(tile);
}

// Token t's rows of a split AttentionArgs: each part's output weighted by its share of the
// whole softmax's sum (its own sum times e^(its max - the largest)), a sink one more share.
void merge_parts(const Cut& c, int64_t t) {
    const AttentionArgs& a = *c.a;
    for (int32_t h = 0; h < a.n_head; ++h) {
        float mx = a.sinks ? a.sinks[h] : -INFINITY;
        for (int64_t p = 0; p < c.parts; ++p) {
            const float* row = c.partial_row(t, h, p);
            if (row[c.v_dim + 1] > 0) mx = std::max(mx, row[c.v_dim]);
        }
        float total = a.sinks ? std::exp(a.sinks[h] - mx) : 0.0f;
        for (int64_t p = 0; p < c.parts; ++p) {
            const float* row = c.partial_row(t, h, p);
            if (row[c.v_dim + 1] > 0) total += row[c.v_dim + 1] * std::exp(row[c.v_dim] - mx);
        }
        float* out = a.out + (t * a.n_head + h) * c.v_dim;
        std::fill_n(out, c.v_dim, 0.0f);
        for (int64_t p = 0; p < c.parts; ++p) {
            const float* row = c.partial_row(t, h, p);
            if (!(row[c.v_dim + 1] > 0)) continue;  // no key of this part (its outputs are not numbers)
            const float w = row[c.v_dim + 1] * std::exp(row[c.v_dim] - mx) / total;
            for (int32_t d = 0; d < c.v_dim; ++d) out[d] += w * row[d];
        }
    }
}

// The split rows' partial outputs held at once: a verify pass of many rows at a long context
// runs in groups of rows (each row's bits are the same in any group).
constexpr int64_t kMaxPartialFloats = int64_t{16} << 20;  // 64 MiB

// Causal rows [from, from + n) of `a`, as an AttentionArgs of their own.
AttentionArgs rows_of(const AttentionArgs& a, int64_t from, int64_t n) {
    AttentionArgs r = a;
    r.n_tokens = n;
    r.pos0 = a.pos0 + from;
    r.q = a.q + from * a.n_head * int64_t(a.head_dim);
    r.out = a.out + from * a.n_head * int64_t(a.v_dim());
    return r;
}

// Decode rows on both sides of the first part's edge, as two (a row that sees at most
// kAttentionSplitKeys keys is a decode step's unsplit row, the others its split ones), and
// split rows in pieces whose partial outputs fit kMaxPartialFloats.
std::vector<AttentionArgs> in_pieces(std::span<const AttentionArgs> batch) {
    std::vector<AttentionArgs> out;
    out.reserve(batch.size() + 1);
    for (const AttentionArgs& a : batch) {
        const bool decode = !a.tree && decode_rows(a);
        const int64_t whole = kAttentionSplitKeys - a.pos0;  // rows at positions below the edge
        if (!decode || whole >= a.n_tokens) {
            out.push_back(a);
            continue;
        }
        int64_t from = 0;
        if (whole > 0) out.push_back(rows_of(a, 0, whole)), from = whole;
        const Cut c = cut_of(rows_of(a, from, a.n_tokens - from));
        const int64_t per_row = c.partial_floats() / (a.n_tokens - from);
        const int64_t step = std::max<int64_t>(1, kMaxPartialFloats / std::max<int64_t>(1, per_row));
        for (; from < a.n_tokens; from += step) out.push_back(rows_of(a, from, std::min(step, a.n_tokens - from)));
    }
    return out;
}

void attend_group(std::span<const AttentionArgs> batch);

}  // namespace

void attention(const AttentionArgs& a) { attention_batch({&a, 1}); }

void attention_batch(std::span<const AttentionArgs> given) {
    // Groups of pieces whose partial outputs fit together.
    const std::vector<AttentionArgs> pieces = in_pieces(given);
    size_t first = 0;
    int64_t floats = 0;
    for (size_t i = 0; i < pieces.size(); ++i) {
        const int64_t f = cut_of(pieces[i]).partial_floats();
        if (i > first && floats + f > kMaxPartialFloats) {
            attend_group({pieces.data() + first, i - first});
            first = i, floats = 0;
        }
        floats += f;
    }
    attend_group({pieces.data() + first, pieces.size() - first});
}

namespace {

void attend_group(std::span<const AttentionArgs> batch) {
    std::vector<Cut> cuts;
    cuts.reserve(batch.size());
    int64_t n_tasks = 0, n_partial = 0;
    std::vector<std::pair<size_t, int64_t>> merges;  // (cut, token) of split rows
    for (const AttentionArgs& a : batch) {
        Cut c = cut_of(a);
        c.first_task = n_tasks;
        n_tasks += c.tasks();
        n_partial += c.partial_floats();
        for (int64_t t = 0; c.parts > 1 && t < a.n_tokens; ++t) merges.emplace_back(cuts.size(), t);
        cuts.push_back(c);
    }
    if (n_partial > 0) {
        auto* partial = reinterpret_cast<float*>(thread_scratch(5, sizeof(float) * n_partial));
        for (Cut& c : cuts) c.partial = c.parts > 1 ? partial : nullptr, partial += c.partial_floats();
    }
    parallel_for(n_tasks, [&](int64_t task) {
        const Cut& c = *(std::upper_bound(cuts.begin(), cuts.end(), task, [](int64_t i, const Cut& x) { return i < x.first_task; }) - 1);
        const int64_t local = task - c.first_task, rest = local / c.a->n_head_kv;
        run_task(c, static_cast<int32_t>(local % c.a->n_head_kv), rest / c.parts, rest % c.parts);
    });
    if (!merges.empty())
        parallel_for(static_cast<int64_t>(merges.size()), [&](int64_t i) { merge_parts(cuts[merges[size_t(i)].first], merges[size_t(i)].second); });
}

}  // namespace

}  // namespace strata::cpu
