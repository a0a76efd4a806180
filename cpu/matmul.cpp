#include "cpu/matmul.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <vector>

#include "cpu/quant.h"
#include "cpu/quant_ref.h"
#include "runtime/core/error.h"

namespace strata::cpu {
namespace {

// Rows per task: at least 8 tasks per thread, so a core slowed by other work does not hold up
// the rest; at least ~16 KiB of weight-token work, so scheduling is noise; at most ~256 KiB of
// weights, so a tile stays in L2 while every token group re-reads it.
int64_t rows_per_task(int64_t n_rows, int64_t w_row_bytes, int64_t n_tokens) {
    const int64_t n_threads = std::max(1, tbb::this_task_arena::max_concurrency());
    const int64_t even = (n_rows + n_threads * 8 - 1) / (n_threads * 8);
    const int64_t min_work = (16 << 10) / std::max<int64_t>(1, w_row_bytes * n_tokens);
    const int64_t cache_cap = std::max<int64_t>(1, std::min<int64_t>(n_rows, (256 << 10) / w_row_bytes));
    return std::clamp(std::max(even, min_work), int64_t{1}, cache_cap);
}

}  // namespace

void matmul(DType wtype, const void* weights, int64_t n_rows, int64_t n_cols, const float* x, int64_t n_tokens,
            float* y) {
    const DType atype = activation_type_for(wtype);  // throws for unsupported types
    if (n_rows <= 0 || n_tokens <= 0) return;
    if (n_cols == 0) {  // empty dot products
        std::fill(y, y + n_rows * n_tokens, 0.0f);
        return;
    }
    STRATA_ASSERT(n_cols % traits(wtype).block_elems == 0);
    STRATA_ASSERT(n_cols % traits(atype).block_elems == 0);
    const size_t w_stride = row_bytes(wtype, n_cols);
    const size_t a_stride = row_bytes(atype, n_cols);

    // Activations: each token row quantized once. F32 needs no conversion: use x as it is.
    const uint8_t* acts = reinterpret_cast<const uint8_t*>(x);
    // Per call, not thread_local: a thread waiting in parallel_for may run another matmul.
    std::vector<uint8_t> scratch;
    if (atype != DType::F32) {
        scratch.resize(a_stride * n_tokens);
        uint8_t* dst = scratch.data();
        auto quantize = [&](int64_t t) { quantize_activations(atype, x + t * n_cols, dst + t * a_stride, n_cols); };
        if (n_tokens >= 8)
            tbb::parallel_for(int64_t{0}, n_tokens, quantize);
        else
            for (int64_t t = 0; t < n_tokens; ++t) quantize(t);
        acts = dst;
    }

    const auto* w = static_cast<const uint8_t*>(weights);
    const int64_t tile = rows_per_task(n_rows, static_cast<int64_t>(w_stride), n_tokens);
    const int64_t n_tasks = (n_rows + tile - 1) / tile;
    tbb::parallel_for(
        tbb::blocked_range<int64_t>(0, n_tasks, 1),
        [&](const tbb::blocked_range<int64_t>& range) {
            float out[kMaxTokens];
            for (int64_t task = range.begin(); task < range.end(); ++task) {
                const int64_t r0 = task * tile, r1 = std::min(n_rows, r0 + tile);
                // Token groups outside, rows inside: the tile's rows stay in cache for every group.
                for (int64_t t0 = 0; t0 < n_tokens; t0 += kMaxTokens) {
                    const int nt = static_cast<int>(std::min<int64_t>(kMaxTokens, n_tokens - t0));
                    for (int64_t r = r0; r < r1; ++r) {
                        vec_dot_rows(wtype, w + r * w_stride, acts + t0 * a_stride, a_stride, nt, n_cols, out);
                        for (int t = 0; t < nt; ++t) y[(t0 + t) * n_rows + r] = out[t];
                    }
                }
            }
        },
        tbb::simple_partitioner());
}

}  // namespace strata::cpu
