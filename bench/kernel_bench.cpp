// strata_kernel_bench: prefill (GEMM-shaped) matmul rates of cpu::matmul against oneDNN's
// matmul, on the projection shapes of a model, so the choice of kernel per weight type rests on
// a measurement. Prints one Markdown row per shape with GFLOP/s (mean ± stddev of the timed
// repetitions after one warm-up) for:
//   - cpu::matmul on Q4_0, Q8_0, Q4_K and F16 weights: default two-level int8 activations; the
//     `/i8` columns use --int8-acts' single level, the `/bf16` columns the opt-in oneDNN bf16
//     prefill (cpu/onednn_matmul.h: weights dequantized to bf16 on every call; n/a below its
//     kBf16PrefillMinTokens or where oneDNN has no AMX),
//   - oneDNN bf16 x bf16 -> f32, weights reordered once to the layout oneDNN picks
//     (format_tag::any); the f32 -> bf16 conversion of the activations is timed,
//   - oneDNN u8 x s8 -> f32, per-output-row weight scales, one scale and zero point for the
//     activations; their quantization is timed.
// Weights are random (block scales small and finite); the rates do not depend on the values.
// Both libraries get the same thread count: cpu::ThreadPool(n) and OpenMP's n threads (the
// Debian oneDNN runs on OpenMP).
//
// With --decode it measures decode instead: one token (or --tokens of them, a batch's or a
// verified draft's decode pass) through cpu::matmul, in GB/s of weights, each quantized type
// with its weights as laid out in the file and tiled (cpu::tile_weights), once streamed from DRAM
// (1 GiB of copies of the matrix, taken in turn, far past the caches) and once from the cache
// (one matrix of 256 rows on one thread: the kernels' compute rate); --types picks its columns.
//
//   strata_kernel_bench [--model tinyllama-1.1b|smollm2-135m|all] [--tokens 512] [--reps 5] [--threads 2]
//                       [--decode [--tokens 1] [--types Q4_0,Q8_0,Q4_K,F16]]   (--types takes any type with kernels: MXFP4 ...)
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <oneapi/dnnl/dnnl.hpp>

#include "core/dtype.h"
#include "cpu/matmul.h"
#include "cpu/onednn_matmul.h"
#include "cpu/quant.h"
#include "cpu/thread_pool.h"

using namespace strata;
using cpu::fp32_to_bf16;
using cpu::fp32_to_fp16;

namespace {

struct ModelShape {
    const char* name;
    int64_t n_embd, n_ff, n_head, n_head_kv;
};
constexpr ModelShape kModels[] = {
    {"tinyllama-1.1b", 2048, 5632, 32, 4},
    {"smollm2-135m", 576, 1536, 9, 3},
};

// One projection: y (tokens x n) = x (tokens x k) W^T, W n x k.
struct Matrix {
    const char* name;
    int64_t n, k;
};
std::vector<Matrix> matrices(const ModelShape& m) {
    const int64_t kv = m.n_embd / m.n_head * m.n_head_kv;
    return {{"q", m.n_embd, m.n_embd}, {"k", kv, m.n_embd},  {"v", kv, m.n_embd},    {"o", m.n_embd, m.n_embd},
            {"gate", m.n_ff, m.n_embd}, {"up", m.n_ff, m.n_embd}, {"down", m.n_embd, m.n_ff}};
}

struct Stat {
    double mean = 0, sd = 0;  // GFLOP/s
    bool ok = false;
};
// cpu::matmul's activations: two-level int8 (the default), single-level int8 (--int8-acts),
// or the opt-in oneDNN bf16 prefill (cpu/onednn_matmul.h).
enum class Variant { Q8x2, Int8, Bf16 };

std::string cell(const Stat& s, int decimals = 0) {
    return s.ok ? fmt::format("{:.{}f} ± {:.{}f}", s.mean, decimals, s.sd, decimals) : "n/a";
}
// GB/s with three significant digits below 10 (a kernel's rate many tokens a call is a few GB/s).
std::string gbps_cell(const Stat& s) { return cell(s, s.mean < 10 ? 2 : 1); }

// Runs fn once to warm up, then `reps` times; GFLOP/s of each run.
template <class F>
Stat time_gflops(double flops, int reps, F&& fn) {
    fn();
    std::vector<double> r;
    for (int i = 0; i < reps; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        fn();
        r.push_back(flops / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 1e9);
    }
    Stat s{0, 0, true};
    for (double v : r) s.mean += v / reps;
    for (double v : r) s.sd += (v - s.mean) * (v - s.mean) / std::max(1, reps - 1);
    s.sd = std::sqrt(s.sd);
    return s;
}

// Random weights in `t`: random bytes with each block's f16 scale fields set to small finite values.
std::vector<uint8_t> random_weights(DType t, int64_t rows, int64_t cols, std::mt19937& rng) {
    std::vector<uint8_t> w(row_bytes(t, cols) * rows);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    if (t == DType::F16) {
        for (size_t i = 0; i < w.size() / 2; ++i) {
            const uint16_t h = fp32_to_fp16(u(rng) * 0.05f);
            std::memcpy(w.data() + 2 * i, &h, 2);
        }
        return w;
    }
    for (auto& b : w) b = static_cast<uint8_t>(rng());
    const size_t bb = traits(t).block_bytes;
    const cpu::F16ScaleFields fields = cpu::f16_scale_fields(t);
    for (size_t blk = 0; blk < w.size() / bb; ++blk) {
        for (int s = 0; s < fields.n; ++s) {
            const uint16_t h = fp32_to_fp16(u(rng) * 1e-3f);
            std::memcpy(w.data() + blk * bb + fields.at[s], &h, 2);
        }
        if (t == DType::MXFP4) w[blk * bb] = 118;  // its e8m0 exponent: a scale of 2^-10
    }
    return w;
}

uint16_t to_bf16(float f) { return fp32_to_bf16(f); }

// oneDNN bf16: x (f32) -> bf16 by a reorder, then the matmul with pre-reordered weights.
Stat onednn_bf16(dnnl::engine& eng, dnnl::stream& s, const std::vector<float>& x, const std::vector<float>& w, int64_t m,
                 int64_t n, int64_t k, int reps) {
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    const dnnl::memory::desc src_f32({m, k}, dt::f32, tag::ab), src_md({m, k}, dt::bf16, tag::ab);
    const dnnl::memory::desc wei_any({k, n}, dt::bf16, tag::any), dst_md({m, n}, dt::f32, tag::ab);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src_md, wei_any, dst_md), eng);
    // W is n x k row-major: as a k x n matrix that is layout "ba".
    std::vector<uint16_t> wb(w.size());
    std::transform(w.begin(), w.end(), wb.begin(), to_bf16);
    dnnl::memory wei_user({{k, n}, dt::bf16, tag::ba}, eng, wb.data());
    dnnl::memory wei(pd.weights_desc(), eng);
    dnnl::reorder(wei_user, wei).execute(s, wei_user, wei);
    dnnl::memory src_user(src_f32, eng, const_cast<float*>(x.data())), src(src_md, eng), dst(dst_md, eng);
    const dnnl::reorder to_bf16_acts(src_user, src);
    const dnnl::matmul mm(pd);
    s.wait();
    return time_gflops(2.0 * m * n * k, reps, [&] {
        to_bf16_acts.execute(s, src_user, src);
        mm.execute(s, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}});
        s.wait();
    });
}

// oneDNN u8 x s8 -> f32: weights quantized per output row once; activations get one scale and
// zero point per call (oneDNN 2.x matmul scales the output per column only, not per token).
Stat onednn_u8s8(dnnl::engine& eng, dnnl::stream& s, const std::vector<float>& x, const std::vector<float>& w, int64_t m,
                 int64_t n, int64_t k, int reps) {
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    const dnnl::memory::desc src_md({m, k}, dt::u8, tag::ab), wei_any({k, n}, dt::s8, tag::any), dst_md({m, n}, dt::f32, tag::ab);
    dnnl::primitive_attr attr;
    attr.set_output_scales(1 << 1, {DNNL_RUNTIME_F32_VAL});
    attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src_md, wei_any, dst_md), attr, eng);
    std::vector<int8_t> wq(w.size());
    std::vector<float> w_scale(n);
    for (int64_t r = 0; r < n; ++r) {
        float amax = 0;
        for (int64_t c = 0; c < k; ++c) amax = std::max(amax, std::fabs(w[r * k + c]));
        w_scale[r] = amax > 0 ? amax / 127 : 1;
        for (int64_t c = 0; c < k; ++c) wq[r * k + c] = static_cast<int8_t>(std::lrint(w[r * k + c] / w_scale[r]));
    }
    dnnl::memory wei_user({{k, n}, dt::s8, tag::ba}, eng, wq.data());
    dnnl::memory wei(pd.weights_desc(), eng);
    dnnl::reorder(wei_user, wei).execute(s, wei_user, wei);
    std::vector<uint8_t> xq(x.size());
    std::vector<float> out_scale(n);
    int32_t zp = 128;
    dnnl::memory src(src_md, eng, xq.data()), dst(dst_md, eng);
    dnnl::memory scales_mem({{n}, dt::f32, tag::a}, eng, out_scale.data());
    dnnl::memory zp_mem({{1}, dt::s32, tag::a}, eng, &zp);
    const dnnl::matmul mm(pd);
    s.wait();
    return time_gflops(2.0 * m * n * k, reps, [&] {
        float lo = 0, hi = 0;
#pragma omp parallel for reduction(min : lo) reduction(max : hi)
        for (size_t i = 0; i < x.size(); ++i) lo = std::min(lo, x[i]), hi = std::max(hi, x[i]);
        const float scale = std::max(hi - lo, 1e-20f) / 255;
        zp = static_cast<int32_t>(std::lrint(-lo / scale));
        const float inv = 1 / scale;
#pragma omp parallel for
        for (size_t i = 0; i < x.size(); ++i)
            xq[i] = static_cast<uint8_t>(std::clamp<long>(std::lrint(x[i] * inv) + zp, 0, 255));
        for (int64_t r = 0; r < n; ++r) out_scale[r] = scale * w_scale[r];
        mm.execute(s, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst},
                       {DNNL_ARG_ATTR_OUTPUT_SCALES, scales_mem}, {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, zp_mem}});
        s.wait();
    });
}

const char* isa_name(dnnl::cpu_isa isa) {
    switch (isa) {
        case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
        case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
        case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
        case dnnl::cpu_isa::avx512_core: return "avx512_core";
        case dnnl::cpu_isa::avx2: return "avx2";
        default: return "other";
    }
}

// Decode: GB/s of weights for `n_tok` tokens times `copies` consecutive copies of an n x k matrix.
Stat decode_gbps(DType t, bool tile, int64_t n, int64_t k, int64_t n_tok, size_t bytes, cpu::ThreadPool& pool, int reps,
                 std::mt19937& rng) {
    const std::vector<uint8_t> one = random_weights(t, n, k, rng);
    const size_t copies = std::max<size_t>(1, bytes / one.size());
    std::vector<uint8_t> w(one.size() * copies);
    for (size_t c = 0; c < copies; ++c) std::memcpy(w.data() + c * one.size(), one.data(), one.size());
    Stat none;
    if (tile) {
        bool tiled = false;
        pool.run([&] { tiled = cpu::tile_weights(t, w.data(), n * static_cast<int64_t>(copies), k); });
        if (!tiled) return none;  // float types: no tiled layout
    }
    std::vector<float> x(k * n_tok), y(n * n_tok);
    std::normal_distribution<float> normal;
    for (auto& v : x) v = normal(rng);
    // time_gflops divides "flops" by seconds: give it bytes, for GB/s.
    return time_gflops(static_cast<double>(w.size()), reps, [&] {
        pool.run([&] {
            for (size_t c = 0; c < copies; ++c)
                cpu::matmul(t, w.data() + c * one.size(), n, k, x.data(), n_tok, y.data(), false, tile);
        });
    });
}

void decode_tables(const std::string& model, const std::vector<DType>& types, int64_t n_tok, int reps, int threads) {
    auto header = [&] {
        std::string h = "| model | matrix | n x k |", rule = "| --- | --- | --- |";
        for (DType t : types)
            for (const char* layout : {"file", "tiled"})
                if (t != DType::F16 || layout == std::string("file")) {
                    h += fmt::format(" {} {} |", dtype_name(t), layout);
                    rule += " ---: |";
                }
        fmt::print("{}\n{}\n", h, rule);
    };
    std::mt19937 rng(1);
    cpu::ThreadPool pool(threads);
    fmt::print("Decode from DRAM: {} token(s) a call, {} threads, 1 GiB of copies of each matrix taken in turn; GB/s of "
               "weights, mean ± sd of {} runs after a warm-up\n\n", n_tok, threads, reps);
    header();
    for (const ModelShape& ms : kModels) {
        if (model != "all" && model != ms.name) continue;
        for (const Matrix& mx : matrices(ms)) {
            if (mx.name == std::string("v") || mx.name == std::string("up")) continue;  // as k and gate
            std::vector<std::string> cells;
            for (DType t : types)
                for (bool tile : {false, true}) {
                    if (t == DType::F16 && tile) continue;
                    cells.push_back(mx.k % traits(t).block_elems ? "n/a"
                                                                 : gbps_cell(decode_gbps(t, tile, mx.n, mx.k, n_tok, size_t{1} << 30, pool, reps, rng)));
                }
            fmt::print("| {} | {} | {} x {} | {} |\n", ms.name, mx.name, mx.n, mx.k, fmt::join(cells, " | "));
        }
    }
    cpu::ThreadPool one_thread(1);
    fmt::print("\nDecode from the cache: {} token(s) a call, 1 thread, one 256 x 2048 matrix (its compute rate); GB/s\n\n", n_tok);
    header();
    std::vector<std::string> cells;
    for (DType t : types)
        for (bool tile : {false, true})
            if (t != DType::F16 || !tile) cells.push_back(gbps_cell(decode_gbps(t, tile, 256, 2048, n_tok, 0, one_thread, reps * 20, rng)));
    fmt::print("| - | - | 256 x 2048 | {} |\n", fmt::join(cells, " | "));
}

[[noreturn]] void usage(const char* why) {
    std::fprintf(stderr, "strata_kernel_bench: %s\nusage: strata_kernel_bench [--model tinyllama-1.1b|smollm2-135m|all] "
                 "[--tokens 512] [--reps 5] [--threads 2] [--decode [--types Q4_0,Q8_0,Q4_K,F16]]\n"
                 "(with --decode, --tokens is the tokens of each decode call, default 1)\n", why);
    std::exit(2);
}

// "Q4_0,F16" -> the decode tables' columns.
std::vector<DType> parse_types(const std::string& list) {
    std::vector<DType> types;
    for (size_t at = 0; at <= list.size();) {
        const size_t comma = std::min(list.find(',', at), list.size());
        const std::string name = list.substr(at, comma - at);
        const auto t = dtype_from_name(name);
        if (!t) usage(("unknown weight type " + name + " in --types").c_str());
        types.push_back(*t);
        at = comma + 1;
    }
    return types;
}

}  // namespace

int main(int argc, char** argv) {
    std::string model = "all";
    int64_t tokens = 0;  // 0: prefill's 512, decode's 1
    int reps = 5, threads = 2;
    bool decode = false;
    std::vector<DType> decode_types = {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::F16};
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--decode") {
            decode = true;
            continue;
        }
        if (i + 1 >= argc) usage(("missing value after " + a).c_str());
        const char* v = argv[++i];
        if (a == "--model") model = v;
        else if (a == "--tokens") {
            if ((tokens = std::atol(v)) < 1) usage("--tokens must be positive");
        }
        else if (a == "--reps") reps = std::atoi(v);
        else if (a == "--threads") threads = std::atoi(v);
        else if (a == "--types") decode_types = parse_types(v);
        else usage(("unknown option " + a).c_str());
    }
    if (reps < 1 || threads < 1) usage("--reps and --threads must be positive");
    if (decode) {
        decode_tables(model, decode_types, tokens > 0 ? tokens : 1, reps, threads);
        return 0;
    }
    if (tokens == 0) tokens = 512;

    omp_set_num_threads(threads);
    cpu::ThreadPool pool(threads);
    dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    dnnl::stream strm(eng);
    const dnnl_version_t* ver = dnnl_version();
    fmt::print("oneDNN {}.{}.{} (CPU runtime {}, ISA {}), {} threads each, {} tokens, mean ± sd of {} runs after a warm-up; GFLOP/s\n\n",
               ver->major, ver->minor, ver->patch, ver->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other",
               isa_name(dnnl::get_effective_cpu_isa()), threads, tokens, reps);

    const DType types[] = {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::F16};
    cpu::set_bf16_prefill(true);
    const bool bf16_usable = tokens >= cpu::kBf16PrefillMinTokens && cpu::bf16_prefill_usable(DType::F16);
    fmt::print("| model | matrix | n x k | Q4_0 | Q4_0/i8 | Q4_0/bf16 | Q8_0 | Q8_0/i8 | Q8_0/bf16 | Q4_K | Q4_K/i8 | Q4_K/bf16 "
               "| F16 | F16/bf16 | oneDNN bf16 | oneDNN u8s8 |\n");
    std::string rule = "| --- | --- | --- |";
    for (int i = 0; i < 13; ++i) rule += " ---: |";
    fmt::print("{}\n", rule);
    // Every cpu::matmul run first, then every oneDNN run, so OpenMP's threads (which spin for a
    // while after each parallel region) are not yet competing with the pool's.
    struct Row {
        std::string label;
        Matrix mx;
        std::vector<float> x;
        std::vector<std::string> cells;
    };
    std::vector<Row> rows;
    std::mt19937 rng(1);
    std::normal_distribution<float> normal;
    for (const ModelShape& ms : kModels)
        if (model == "all" || model == ms.name)
            for (const Matrix& mx : matrices(ms)) {
                Row r{fmt::format("{} | {} | {} x {}", ms.name, mx.name, mx.n, mx.k), mx, std::vector<float>(tokens * mx.k), {}};
                for (auto& v : r.x) v = normal(rng);
                rows.push_back(std::move(r));
            }
    if (rows.empty()) usage(("unknown model " + model).c_str());
    for (Row& r : rows) {
        const Matrix& mx = r.mx;
        std::vector<float> y(tokens * mx.n);
        for (DType t : types) {
            const bool fits = mx.k % traits(t).block_elems == 0;  // e.g. Q4_K needs k % 256 == 0
            const auto w = fits ? random_weights(t, mx.n, mx.k, rng) : std::vector<uint8_t>{};
            for (Variant v : {Variant::Q8x2, Variant::Int8, Variant::Bf16}) {
                if (t == DType::F16 && v == Variant::Int8) continue;
                if (!fits || (v == Variant::Bf16 && !bf16_usable)) {
                    r.cells.push_back("n/a");
                    continue;
                }
                cpu::set_bf16_prefill(v == Variant::Bf16);
                r.cells.push_back(cell(time_gflops(2.0 * tokens * mx.n * mx.k, reps, [&] {
                    pool.run([&] { cpu::matmul(t, w.data(), mx.n, mx.k, r.x.data(), tokens, y.data(), v == Variant::Int8); });
                })));
            }
        }
        cpu::set_bf16_prefill(false);
    }
    for (Row& r : rows) {
        // Float weights: the same for any source type, only oneDNN's layout matters.
        std::vector<float> wf(r.mx.n * r.mx.k);
        for (auto& v : wf) v = normal(rng) * 0.05f;
        for (auto* f : {&onednn_bf16, &onednn_u8s8}) {
            try {
                r.cells.push_back(cell(f(eng, strm, r.x, wf, tokens, r.mx.n, r.mx.k, reps)));
            } catch (const dnnl::error& e) {
                r.cells.push_back(fmt::format("n/a ({})", e.what()));
            }
        }
        fmt::print("| {} | {} |\n", r.label, fmt::join(r.cells, " | "));
    }
    return 0;
}
