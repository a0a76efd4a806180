#include "probe/cpu_costs.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "core/kernel_shapes.h"
#include "cpu/attention_cpu.h"
#include "cpu/norm_rope_act.h"
#include "cpu/quant.h"
#include "cpu/thread_pool.h"
#include "probe/typical.h"

namespace strata::probe {

namespace {

using Clock = std::chrono::steady_clock;

// The typical of `reps` runs of fn, in seconds (probe/typical.h).
template <class F>
double typical_of(int reps, F&& fn) {
    std::vector<double> s;
    for (int i = 0; i < reps; ++i) {
        const auto t0 = Clock::now();
        fn();
        s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
    return median(std::move(s));
}

// Keys of a measured decode row: one part of a split row (cpu/attention_cpu.h), so that each
// KV head is one tile, as the cost model counts them.
constexpr int64_t kKeys = kAttentionSplitKeys;

// Decode attention calls of `n_kv` KV heads (tiles), each with `rows` query heads against kKeys
// keys of head_dim values, over a paged cache laid out as the engine's (runtime/kv/kv_cache.h:
// blocks of 16 positions, a block's key rows then its value rows, every row all KV heads).
// With `layers` > 1, each call reads its own layer's blocks in turn (more bytes than the caches
// hold: the tiles read DRAM). Returns the seconds of one call.
double decode_attention_s(cpu::ThreadPool& pool, DType kv_type, int n_kv, int head_dim, int rows, int reps, int layers = 1,
                          int64_t keys = kKeys) {
    constexpr int64_t kBlock = 16;
    const size_t stride = row_bytes(kv_type, static_cast<int64_t>(n_kv) * head_dim);
    const size_t block_bytes = (2 * kBlock * stride + 63) / 64 * 64, layer_bytes = block_bytes * (keys / kBlock);
    // Small values in every type (zero bytes are valid blocks of the quantized ones).
    std::vector<uint8_t> kv(layer_bytes * static_cast<size_t>(layers), 0);
    if (kv_type == DType::F32 || kv_type == DType::F16 || kv_type == DType::BF16) {
        // Byte i is i * 7 % 61: a period of 61 bytes, copied in chunks of 64 periods.
        std::vector<uint8_t> chunk(61 * 64);
        for (size_t i = 0; i < chunk.size(); ++i) chunk[i] = static_cast<uint8_t>(i * 7 % 61);
        for (size_t at = 0; at < kv.size(); at += chunk.size())
            std::memcpy(kv.data() + at, chunk.data(), std::min(chunk.size(), kv.size() - at));
    }
    std::vector<int32_t> blocks(keys / kBlock);
    for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = static_cast<int32_t>(i);
    std::vector<float> q(static_cast<size_t>(n_kv) * rows * head_dim, 0.01f), out(q.size());
    cpu::AttentionArgs a;
    a.q = q.data(), a.out = out.data();
    a.n_tokens = 1, a.pos0 = keys - 1;
    a.n_head = n_kv * rows, a.n_head_kv = n_kv, a.head_dim = head_dim;
    a.kv_stride = static_cast<int64_t>(stride), a.kv_type = kv_type;
    a.block_table = blocks.data(), a.block_size = kBlock, a.block_stride = static_cast<int64_t>(block_bytes);
    auto all_layers = [&] {
        for (int l = 0; l < layers; ++l) {
            a.k = kv.data() + layer_bytes * l, a.v = kv.data() + layer_bytes * l + kBlock * stride;
            cpu::attention(a);
        }
    };
    double s = 0;
    pool.run([&] {
        all_layers();  // warm: scratch allocated, pages touched
        s = typical_of(reps, all_layers);
    });
    return s / layers;
}

}  // namespace

planner::AttentionTileCost measure_attention_tile(int threads, const std::vector<DType>& kv_types, bool quick,
                                                  uint64_t llc_bytes) {
    cpu::ThreadPool pool(threads);
    const int reps = quick ? 5 : 20;
    // ns per key of one tile (a call of one tile per thread) in three F16 shapes, from the
    // caches; the tile model's three unknowns follow.
    const int T = pool.n_threads();
    const double k = 1e9 / kKeys;
    auto tile_ns = [&](DType type, int head_dim, int rows) { return decode_attention_s(pool, type, T, head_dim, rows, reps) * k; };
    const double a = tile_ns(DType::F16, 128, 1);  // 128 kv + 128 row + score
    const double b = tile_ns(DType::F16, 128, 8);  // 128 kv + 8 (128 row + score)
    const double c = tile_ns(DType::F16, 64, 8);   // 64 kv + 8 (64 row + score)
    planner::AttentionTileCost t;
    const double per_row128 = std::max(0.0, (b - a) / 7);  // 128 row_ns + score_ns
    const double kv128 = std::max(0.0, a - per_row128);   // 128 kv_ns
    const double per_row64 = std::max(0.0, (c - kv128 / 2) / 8);  // 64 row_ns + score_ns
    t.row_ns = std::max(0.0, (per_row128 - per_row64) / 64);
    t.score_ns = std::max(0.0, per_row128 - 128 * t.row_ns);
    t.kv_ns.push_back({DType::F16, kv128 / 128});
    // What a tile costs whatever its keys (its scratch, the scaled queries, the softmax's end):
    // a tile of 16 keys, less 16 keys' worth.
    const double few = decode_attention_s(pool, DType::F16, T, 128, 8, reps * 10, 1, 16) * 1e9;
    t.tile_ns = std::max(0.0, few - 16 * b);
    for (DType type : kv_types)
        if (type != DType::F16) t.kv_ns.push_back({type, std::max(0.0, tile_ns(type, 128, 1) - per_row128) / 128});
    // From DRAM: layers of K and V (4 KV heads of 64 per thread: 128-byte slices of each row)
    // four times the last-level cache, for the rate one thread reads its heads' slices.
    const int n_kv = 4 * T;
    const uint64_t layer_bytes = 2ull * kKeys * n_kv * 64 * 2;
    const int layers = static_cast<int>(std::clamp<uint64_t>(4 * std::max<uint64_t>(llc_bytes, 8u << 20) / layer_bytes, 2, 512));
    const double cold = decode_attention_s(pool, DType::F16, n_kv, 64, 1, quick ? 3 : 5, layers);
    // Each thread's four tiles read while they convert; their one row's products and fixed
    // costs come on top (AttentionTileCost::tile_s), so they are not the read's.
    const double rest = 4 * (t.tile_ns + kKeys * (t.row_ns * 64 + t.score_ns)) * 1e-9;
    t.kv_gbps_per_thread = static_cast<double>(layer_bytes) / T / std::max(cold - rest, 0.5 * cold) / 1e9;
    return t;
}

namespace {

// Seconds of one pass of kTokens tokens' vector ops at width E (query and KV heads of 64,
// n_ff = 2.75 E), run as the forward pass runs them: the norms, RoPE, SwiGLU and each matmul's
// activation quantization one token per task, the residual adds on the calling thread.
double vector_pass_s(cpu::ThreadPool& pool, int64_t E, int reps) {
    constexpr int64_t kTokens = 64;
    const int64_t F = E * 11 / 4 / 64 * 64;
    const int32_t heads = static_cast<int32_t>(E / 64);
    std::vector<float> x(E * kTokens, 0.5f), xn(x.size()), w(E, 1.0f), q(x.size(), 0.25f), kk(x.size(), 0.25f);
    std::vector<float> gate(F * kTokens, 0.1f), up(gate.size(), 0.2f);
    std::vector<uint8_t> acts(cpu::act_q8x2_bytes(F) * kTokens);
    cpu::RopeParams rope;
    rope.head_dim = rope.n_rot = 64;
    auto quantize = [&](const float* src, int64_t n, int64_t t) {
        cpu::quantize_activations(cpu::ActFormat::Q8x2, src + t * n, acts.data() + t * cpu::act_q8x2_bytes(n), n);
    };
    auto pass = [&] {
        cpu::parallel_for(kTokens, [&](int64_t t) {
            cpu::rms_norm(&x[t * E], w.data(), &xn[t * E], E, 1e-5f);
            quantize(xn.data(), E, t);  // q, k, v
        });
        cpu::parallel_for(kTokens, [&](int64_t t) {
            cpu::rope(&q[t * E], heads, t, rope);
            cpu::rope(&kk[t * E], heads, t, rope);
            quantize(q.data(), E, t);  // the output projection's input
        });
        cpu::add(x.data(), xn.data(), E * kTokens);
        cpu::parallel_for(kTokens, [&](int64_t t) {
            cpu::rms_norm(&x[t * E], w.data(), &xn[t * E], E, 1e-5f);
            quantize(xn.data(), E, t);  // gate, up
        });
        cpu::parallel_for(kTokens, [&](int64_t t) {
            cpu::swiglu(&gate[t * F], &up[t * F], F);
            quantize(gate.data(), F, t);  // down
        });
        cpu::add(x.data(), xn.data(), E * kTokens);
    };
    double s = 0;
    pool.run([&] {
        pass();
        s = typical_of(reps, pass);
    });
    return s / kTokens;
}

}  // namespace

planner::VectorCost measure_vector_cost(int threads, bool quick) {
    cpu::ThreadPool pool(threads);
    const int reps = quick ? 3 : 10;
    // Values per token at width E: two norms, RoPE on q and k, two adds (6 E), SwiGLU (F), and
    // the four activation quantizations (3 E + F) — planner::VectorCost::values.
    auto values = [](double E) { const double F = std::floor(E * 11 / 4 / 64) * 64; return 9 * E + 2 * F; };
    const double wide = vector_pass_s(pool, 4096, reps) * threads * 1e9, narrow = vector_pass_s(pool, 512, reps) * threads * 1e9;
    planner::VectorCost c;
    c.ns_per_value = std::max(0.0, (wide - narrow) / (values(4096) - values(512)));
    c.ns_per_token = std::max(0.0, narrow - c.ns_per_value * values(512));
    return c;
}

double measure_loop_us(int threads, bool quick) {
    cpu::ThreadPool pool(threads);
    const int n = quick ? 2000 : 20000;
    double s = 0;
    pool.run([&] {
        const auto t0 = Clock::now();
        for (int i = 0; i < n; ++i) cpu::parallel_for(threads, [](int64_t) {});
        s = std::chrono::duration<double>(Clock::now() - t0).count();
    });
    return s * 1e6 / n;
}

}  // namespace strata::probe
