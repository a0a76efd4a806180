#include "cpu/onednn_matmul.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>
#include <oneapi/dnnl/dnnl.hpp>

#include "cpu/gemm_x86.h"
#include "cpu/quant.h"
#include "cpu/thread_pool.h"
#include "runtime/core/error.h"
#include "runtime/core/log.h"

namespace strata::cpu {
namespace {

constexpr size_t kSliceBytes = size_t{16} << 20;  // bf16 weights handed to oneDNN at a time
constexpr int64_t kRowsPerTask = 64;

std::atomic<int> g_enabled{-1};  // -1: not decided yet (STRATA_BF16_PREFILL)

struct Dnnl {
    dnnl::engine engine{dnnl::engine::kind::cpu, 0};
    dnnl::stream stream{engine};
};
Dnnl& dnnl_context() {
    static Dnnl d;
    return d;
}

bool onednn_has_amx() {
    static const bool yes = [] {
        const bool amx = amx_usable() && dnnl::get_effective_cpu_isa() == dnnl::cpu_isa::avx512_core_amx;
        if (!amx) STRATA_LOG_DEBUG("cpu: no bf16 prefill through oneDNN (it does not run AMX here)");
        return amx;
    }();
    return yes;
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

}  // namespace

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

void bf16_matmul(DType wtype, const void* weights, int64_t n_rows, int64_t n_cols, const float* x, int64_t n_tokens,
                 float* y) {
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    Dnnl& d = dnnl_context();
    const size_t w_stride = row_bytes(wtype, n_cols);
    const int64_t k = n_cols, m = n_tokens;

    // Scratch owned by this (the calling) thread: slot 2 the bf16 activations, slot 0 the bf16
    // weight slice; the dequantizing tasks use slot 1 of their own thread for one f32 row.
    auto* xb = reinterpret_cast<uint16_t*>(thread_scratch(2, sizeof(uint16_t) * m * k));
    parallel_for(m, [&](int64_t t) { to_bf16(x + t * k, xb + t * k, k); });
    const int64_t slice_rows =
        std::max<int64_t>(kRowsPerTask, static_cast<int64_t>(kSliceBytes / (sizeof(uint16_t) * k)) / kRowsPerTask * kRowsPerTask);
    auto* wb = reinterpret_cast<uint16_t*>(thread_scratch(0, sizeof(uint16_t) * std::min(slice_rows, n_rows) * k));

    const dnnl::memory::desc src_md({m, k}, dt::bf16, tag::ab);
    dnnl::memory src(src_md, d.engine, xb);
    omp_set_num_threads(parallel_threads());
    for (int64_t r0 = 0; r0 < n_rows; r0 += slice_rows) {
        const int64_t n = std::min(slice_rows, n_rows - r0);
        parallel_for((n + kRowsPerTask - 1) / kRowsPerTask, [&](int64_t task) {
            float* row = reinterpret_cast<float*>(thread_scratch(1, sizeof(float) * k));
            const int64_t lo = task * kRowsPerTask, hi = std::min(n, lo + kRowsPerTask);
            for (int64_t r = lo; r < hi; ++r) {
                dequantize_row(wtype, static_cast<const uint8_t*>(weights) + (r0 + r) * w_stride, row, k);
                to_bf16(row, wb + r * k, k);
            }
        });
        // W rows are k x n column-major ("ba"); y's slice is columns [r0, r0 + n) of rows n_rows apart.
        const dnnl::memory::desc wei_md({k, n}, dt::bf16, tag::ba);
        const dnnl::memory::desc dst_md({m, n}, dt::f32, dnnl::memory::dims{n_rows, 1});
        try {
            // oneDNN keeps the compiled kernel in its primitive cache: same shapes cost no new JIT.
            const dnnl::matmul mm(dnnl::matmul::primitive_desc(dnnl::matmul::desc(src_md, wei_md, dst_md), d.engine));
            dnnl::memory wei(wei_md, d.engine, wb), dst(dst_md, d.engine, y + r0);
            mm.execute(d.stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}});
            d.stream.wait();
        } catch (const dnnl::error& e) {
            throw BackendError(fmt::format("cpu: oneDNN bf16 matmul of {} x {} x {} failed: {}", m, n, k, e.what()),
                               "run without STRATA_BF16_PREFILL");
        }
    }
}

}  // namespace strata::cpu
