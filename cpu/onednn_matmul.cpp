#include "cpu/onednn_matmul.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <fmt/format.h>
#include <oneapi/dnnl/dnnl.hpp>

#include "core/error.h"
#include "core/log.h"
#include "cpu/gemm_x86.h"
#include "cpu/quant.h"
#include "cpu/thread_pool.h"

namespace strata::cpu {
namespace {

// Rows per task: a multiple of 64, at most 4 MiB of bf16 weights (the per-thread scratch stays
// small whatever the matrix), and about 2 tasks per thread so both cores finish together.
int64_t rows_per_task(int64_t n_rows, int64_t n_cols, int64_t n_threads) {
    const int64_t cap = std::max<int64_t>(64, (int64_t{4} << 20) / (2 * n_cols) / 64 * 64);
    const int64_t even = (n_rows + 2 * n_threads - 1) / (2 * n_threads);
    return std::min(cap, std::max<int64_t>(64, (even + 63) / 64 * 64));
}

std::atomic<int> g_enabled{-1};  // -1: not decided yet (STRATA_BF16_PREFILL)

dnnl::engine& cpu_engine() {
    static dnnl::engine e(dnnl::engine::kind::cpu, 0);
    return e;
}


// n floats -> bf16, rounded to nearest even (as fp32_to_bf16). Only called where AMX exists,
// so the CPU has AVX512-BF16.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void to_bf16(const float* src, uint16_t* dst, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256bh v = _mm512_cvtneps_pbh(_mm512_loadu_ps(src + i));
        std::memcpy(dst + i, &v, sizeof v);
    }
    for (; i < n; ++i) dst[i] = fp32_to_bf16(src[i]);
}

// One oneDNN matmul per shape, compiled once per thread: y (m x n, rows ldy apart, f32) =
// x (m x k, bf16) times W^T (n rows of k bf16). Each pool thread runs its own sequentially
// (one OpenMP thread), with its own scratchpad, so oneDNN starts no threads of its own and
// concurrent calls share nothing.
class ThreadMatmuls {
public:
    void run(int64_t m, int64_t n, int64_t k, int64_t ldy, const uint16_t* x, const uint16_t* w, float* y) {
        Entry& e = find(m, n, k, ldy);
        dnnl::memory src(e.pd.src_desc(), cpu_engine(), const_cast<uint16_t*>(x));
        dnnl::memory wei(e.pd.weights_desc(), cpu_engine(), const_cast<uint16_t*>(w));
        dnnl::memory dst(e.pd.dst_desc(), cpu_engine(), y);
        dnnl::memory pad(e.pd.scratchpad_desc(), cpu_engine(), thread_scratch(3, e.pd.scratchpad_desc().get_size() + 64));
        const int saved = omp_get_max_threads();
        omp_set_num_threads(1);
        e.mm.execute(stream_, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}, {DNNL_ARG_SCRATCHPAD, pad}});
        stream_.wait();
        omp_set_num_threads(saved);
    }

private:
    struct Entry {
        int64_t m, n, k, ldy;
        dnnl::matmul::primitive_desc pd;
        dnnl::matmul mm;
    };
    static constexpr size_t kMaxEntries = 32;  // a model has a handful of (n, k); prompts vary m

    Entry& find(int64_t m, int64_t n, int64_t k, int64_t ldy) {
        for (size_t i = 0; i < entries_.size(); ++i)
            if (entries_[i].m == m && entries_[i].n == n && entries_[i].k == k && entries_[i].ldy == ldy) {
                std::rotate(entries_.begin(), entries_.begin() + static_cast<std::ptrdiff_t>(i), entries_.begin() + static_cast<std::ptrdiff_t>(i) + 1);
                return entries_.front();  // most recent first
            }
        using dt = dnnl::memory::data_type;
        using tag = dnnl::memory::format_tag;
        const dnnl::memory::desc src_md({m, k}, dt::bf16, tag::ab);
        const dnnl::memory::desc wei_md({k, n}, dt::bf16, tag::ba);  // W's rows are k x n column-major
        const dnnl::memory::desc dst_md({m, n}, dt::f32, dnnl::memory::dims{ldy, 1});
        dnnl::primitive_attr attr;
        attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
        dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src_md, wei_md, dst_md), attr, cpu_engine());
        if (entries_.size() == kMaxEntries) entries_.pop_back();
        entries_.insert(entries_.begin(), Entry{m, n, k, ldy, pd, dnnl::matmul(pd)});
        return entries_.front();
    }

    dnnl::stream stream_{cpu_engine()};
    std::vector<Entry> entries_;
};

}  // namespace

bool onednn_has_amx() {
    static const bool yes = [] {
        const bool amx = amx_usable() && dnnl::get_effective_cpu_isa() == dnnl::cpu_isa::avx512_core_amx;
        if (!amx) STRATA_LOG_DEBUG("cpu: no bf16 prefill through oneDNN (it does not run AMX here)");
        return amx;
    }();
    return yes;
}

bool bf16_prefill_enabled() {
    int on = g_enabled.load(std::memory_order_relaxed);
    if (on < 0) {
        const char* env = std::getenv("STRATA_BF16_PREFILL");
        on = env && *env && std::strcmp(env, "0") != 0;
        g_enabled.store(on, std::memory_order_relaxed);
    }
    return on != 0;
}

void set_bf16_prefill(bool on) { g_enabled.store(on ? 1 : 0, std::memory_order_relaxed); }

bool bf16_prefill_usable(DType wtype) { return bf16_prefill_enabled() && has_kernels(wtype) && onednn_has_amx(); }

void bf16_matmul(DType wtype, const void* weights, bool tiled, int64_t n_rows, int64_t n_cols, const float* x,
                 int64_t n_tokens, float* y) {
    const size_t w_stride = row_bytes(wtype, n_cols);
    const int64_t k = n_cols, m = n_tokens;
    // Scratch: slot 2 of the calling thread holds the bf16 activations; each task uses slot 0
    // (its bf16 weight rows), 1 (16 f32 rows) and 3 (oneDNN's scratchpad) of its own thread.
    auto* xb = reinterpret_cast<uint16_t*>(thread_scratch(2, sizeof(uint16_t) * m * k));
    parallel_for(m, [&](int64_t t) { to_bf16(x + t * k, xb + t * k, k); });
    const int64_t rows = rows_per_task(n_rows, k, parallel_threads());
    parallel_for((n_rows + rows - 1) / rows, [&](int64_t task) {
        const int64_t r0 = task * rows, n = std::min(rows, n_rows - r0);
        auto* wb = reinterpret_cast<uint16_t*>(thread_scratch(0, sizeof(uint16_t) * n * k));
        float* f32 = reinterpret_cast<float*>(thread_scratch(1, sizeof(float) * kRowTile * k));
        for (int64_t r = 0; r < n; r += kRowTile) {  // r0 is a multiple of 64: whole tiles
            const int64_t m16 = std::min<int64_t>(kRowTile, n - r);
            if (tiled) dequantize_tiled_rows(wtype, weights, n_rows, k, r0 + r, m16, f32);
            else
                for (int64_t i = 0; i < m16; ++i)
                    dequantize_row(wtype, static_cast<const uint8_t*>(weights) + (r0 + r + i) * w_stride, f32 + i * k, k);
            for (int64_t i = 0; i < m16; ++i) to_bf16(f32 + i * k, wb + (r + i) * k, k);
        }
        try {
            thread_local ThreadMatmuls matmuls;
            matmuls.run(m, n, k, n_rows, xb, wb, y + r0);
        } catch (const dnnl::error& e) {
            throw BackendError(fmt::format("cpu: oneDNN bf16 matmul of {} x {} x {} failed: {}", m, n, k, e.what()),
                               "run without --bf16-prefill (STRATA_BF16_PREFILL)");
        }
    });
}

}  // namespace strata::cpu
