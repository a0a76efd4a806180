#include "cpu/matmul.h"

#include <algorithm>
#include <cstdlib>
#include <limits>

#include "core/error.h"
#include "cpu/cpu_features.h"
#include "cpu/gemm_x86.h"
#include "cpu/onednn_matmul.h"
#include "cpu/quant.h"
#include "cpu/thread_pool.h"

namespace strata::cpu {

uint8_t* thread_scratch(int slot, size_t bytes) {
    struct Buf {
        uint8_t* p = nullptr;
        size_t n = 0;
        ~Buf() { std::free(p); }
    };
    thread_local Buf bufs[6];
    STRATA_ASSERT(slot >= 0 && slot < 6);
    Buf& b = bufs[slot];
    if (b.n < bytes) {
        std::free(b.p);
        const size_t n = (std::max(bytes, b.n + b.n / 2) + 63) & ~size_t{63};
        b.p = static_cast<uint8_t*>(std::aligned_alloc(64, n));
        if (!b.p) throw BackendError("cpu: out of memory for a " + std::to_string(n) + "-byte kernel buffer");
        b.n = n;
    }
    return b.p;
}

namespace {

// Rows per task, a multiple of the 16-row kernel tile. Decode (few tokens): about 4 tasks per
// thread, so a core slowed by other work does not hold up the rest, and at least 16 KiB of
// weights each, so scheduling is noise. Prefill: 64 rows (the kernels pack 4 tiles together and
// reuse each group of activation rows across them) when that still gives every thread 2 tasks.
int64_t rows_per_task(int64_t n_rows, int64_t w_row_bytes, int64_t n_tokens) {
    const int64_t n_threads = parallel_threads();
    auto round16 = [](int64_t r) { return std::max<int64_t>(kRowTile, (r + kRowTile - 1) / kRowTile * kRowTile); };
    if (n_tokens > kDecodeTokens) return n_rows >= 64 * 2 * n_threads ? 64 : kRowTile;
    const int64_t even = (n_rows + n_threads * 4 - 1) / (n_threads * 4);
    const int64_t min_work = (16 << 10) / std::max<int64_t>(1, w_row_bytes);
    return round16(std::max(even, min_work));
}

}  // namespace

int64_t row_invariant_tokens() {
    return active_path() == CpuPath::Avx512 && amx_enabled() ? kAmxMinTokens - 1 : std::numeric_limits<int64_t>::max();
}

void matmul(DType wtype, const void* weights, int64_t n_rows, int64_t n_cols, const float* x, int64_t n_tokens,
            float* y, bool int8, bool tiled) {
    const MatmulOut out{wtype, weights, n_rows, y, tiled};
    matmul_many({&out, 1}, n_cols, x, n_tokens, int8);
}

void matmul_many(std::span<const MatmulOut> outs, int64_t n_cols, const float* x, int64_t n_tokens, bool int8) {
    constexpr size_t kMaxOuts = 8;
    STRATA_ASSERT(outs.size() <= kMaxOuts);
    bool need_q8 = false, need_f32 = false;
    for (const MatmulOut& o : outs) {
        const bool q8 = act_format_for(o.wtype) == ActFormat::Q8x2;  // throws for unsupported types
        need_q8 |= q8;
        need_f32 |= !q8;
    }
    if (n_tokens <= 0) return;
    if (n_cols == 0) {  // empty dot products
        for (const MatmulOut& o : outs) std::fill(o.y, o.y + o.n_rows * n_tokens, 0.0f);
        return;
    }
    if (n_tokens >= kBf16PrefillMinTokens) {  // opt-in oneDNN bf16 prefill; the other outputs below
        MatmulOut rest[kMaxOuts];
        size_t n_rest = 0;
        for (const MatmulOut& o : outs) {
            if (bf16_prefill_usable(o.wtype)) bf16_matmul(o.wtype, o.weights, o.tiled, o.n_rows, n_cols, x, n_tokens, o.y);
            else rest[n_rest++] = o;
        }
        if (n_rest < outs.size()) {
            if (n_rest > 0) matmul_many({rest, n_rest}, n_cols, x, n_tokens, int8);
            return;
        }
    }

    // Activations: each token row converted once; F32 needs no conversion.
    const uint8_t* q8 = nullptr;
    size_t q8_stride = 0;
    if (need_q8) {
        STRATA_ASSERT(n_cols % kActBlock == 0);
        q8_stride = act_q8x2_bytes(n_cols);
        // The caller's own buffer (slot 2; the kernels use 0, 1 and 3, the F32 transpose 4), reused.
        uint8_t* acts = thread_scratch(2, q8_stride * n_tokens);
        auto quantize = [&](int64_t t) {
            quantize_activations(int8 ? ActFormat::Q8 : ActFormat::Q8x2, x + t * n_cols, acts + t * q8_stride, n_cols);
        };
        if (n_tokens >= 8)
            parallel_for(n_tokens, quantize);
        else
            for (int64_t t = 0; t < n_tokens; ++t) quantize(t);
        q8 = acts;
    }

    // F32 activations for a batch: also in groups of 16 tokens, column-major (MatmulJob::xt).
    float* xt = nullptr;
    if (need_f32 && n_tokens > kDecodeTokens) {
        const int64_t n_groups = (n_tokens + 15) / 16;
        xt = reinterpret_cast<float*>(thread_scratch(4, sizeof(float) * 16 * n_cols * n_groups));
        parallel_for(n_groups, [&](int64_t g) {
            float* dst = xt + g * n_cols * 16;
            for (int64_t t = 0; t < 16; ++t) {
                const int64_t tok = 16 * g + t;
                for (int64_t k = 0; k < n_cols; ++k) dst[k * 16 + t] = tok < n_tokens ? x[tok * n_cols + k] : 0.0f;
            }
        });
    }

    MatmulJob jobs[kMaxOuts];
    int64_t tile[kMaxOuts], first_task[kMaxOuts + 1];
    first_task[0] = 0;
    for (size_t i = 0; i < outs.size(); ++i) {
        const MatmulOut& o = outs[i];
        STRATA_ASSERT(n_cols % traits(o.wtype).block_elems == 0);
        MatmulJob& job = jobs[i];
        job.w = static_cast<const uint8_t*>(o.weights);
        job.w_stride = row_bytes(o.wtype, n_cols);
        job.w_tiled = o.tiled;
        job.n_rows = o.n_rows;
        job.n_cols = n_cols;
        job.n_tok = n_tokens;
        job.y = o.y;
        job.ldy = o.n_rows;
        if (act_format_for(o.wtype) == ActFormat::F32) {
            job.acts = reinterpret_cast<const uint8_t*>(x);
            job.a_stride = n_cols * sizeof(float);
            job.xt = xt;
        } else {
            job.acts = q8;
            job.a_stride = q8_stride;
            job.skip_lo = int8;
        }
        tile[i] = rows_per_task(o.n_rows, static_cast<int64_t>(job.w_stride), n_tokens);
        first_task[i + 1] = first_task[i] + (o.n_rows + tile[i] - 1) / tile[i];
    }
    const int64_t n_tasks = first_task[outs.size()];
    parallel_for(n_tasks, [&](int64_t task) {
        size_t i = 0;
        while (task >= first_task[i + 1]) ++i;
        const int64_t r0 = (task - first_task[i]) * tile[i];
        matmul_rows(outs[i].wtype, jobs[i], r0, std::min(outs[i].n_rows, r0 + tile[i]));
    });
}

}  // namespace strata::cpu
