// Causal attention of a prompt chunk (a run of one sequence's consecutive positions) over the
// paged KV cache on the tensor cores, FlashAttention-2 style: a thread block takes 64 query
// rows of one head (16 per warp); it walks the keys in tiles, converting each tile of keys and
// values to half precision in shared memory, computes the scores with WMMA, keeps each row's
// running max and sum (online softmax, in float), and adds P V into float outputs held in
// shared memory. Scale, soft cap, sliding window and sinks as cpu::attention.
#include <mma.h>

#include <algorithm>
#include <vector>

#include "gpu/cuda_check.h"
#include "gpu/cuda_kernels.h"
#include "gpu/kernels/attention_common.cuh"

namespace strata::gpu {

void decode_attention_rows(const DecodeAttentionArgs& a, int64_t row0, int64_t n_rows, CudaStream& s);

namespace {

using blocks::KvElem;
using blocks::KvKind;
namespace wmma = nvcuda::wmma;

constexpr int kThreads = 128, kWarps = 4, kRows = 16 * kWarps;  // 64 query rows per thread block

template <int kHd, int kKt>
struct PrefillSmem {
    static constexpr size_t q = 0;
    static constexpr size_t k = q + sizeof(__half) * kRows * kHd;
    static constexpr size_t v = k + sizeof(__half) * kKt * kHd;
    static constexpr size_t s = v + sizeof(__half) * kKt * kHd;
    static constexpr size_t p = s + sizeof(float) * kRows * kKt;
    static constexpr size_t o = p + sizeof(__half) * kRows * kKt;
    static constexpr size_t rows = o + sizeof(float) * kRows * kHd;
    static constexpr size_t bytes = rows + sizeof(float) * 3 * kRows;
};

// One tile of keys and values of KV head hk into shared memory as halves (zeros past key_end).
template <KvKind kKind, bool kEight, int kHd, int kKt>
__device__ void load_kv_tile(const DecodeAttentionArgs& a, const int32_t* table, int64_t kt, int64_t key_end, int hk,
                             __half* ks, __half* vs) {
    using E = KvElem<kKind>;
    constexpr int kChunks = kHd / 8;
    for (int c = threadIdx.x; c < kKt * kChunks; c += kThreads) {
        const int kk = c / kChunks, d = 8 * (c % kChunks);
        const int64_t j = kt + kk;
        float kv[8] = {}, vv[8] = {};
        if (j >= 0 && j < key_end) {
            const uint8_t* kr = kv_row_at(a.k, table, j, a.row_stride, a.block_stride);
            const uint8_t* vr = kv_row_at(a.v, table, j, a.row_stride, a.block_stride);
            const int64_t at = int64_t(hk) * kHd + d;
            if constexpr (kEight) {
                E::eight(kr, at, kv);
                E::eight(vr, at, vv);
            } else {
                for (int i = 0; i < 8; ++i) kv[i] = E::one(kr, at + i), vv[i] = E::one(vr, at + i);
            }
        }
        __half2 hk2[4], hv2[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            hk2[i] = __floats2half2_rn(kv[2 * i], kv[2 * i + 1]);
            hv2[i] = __floats2half2_rn(vv[2 * i], vv[2 * i + 1]);
        }
        *reinterpret_cast<uint4*>(ks + kk * kHd + d) = *reinterpret_cast<const uint4*>(hk2);
        *reinterpret_cast<uint4*>(vs + kk * kHd + d) = *reinterpret_cast<const uint4*>(hv2);
    }
}

// grid = (query tiles of the run, n_head), 128 threads.
template <KvKind kKind, bool kEight, int kHd, int kKt>
__global__ void __launch_bounds__(kThreads) prefill_kernel(DecodeAttentionArgs a, QueryRun run, float scale) {
    using L = PrefillSmem<kHd, kKt>;
    extern __shared__ __align__(128) unsigned char smem[];
    __half* qs = reinterpret_cast<__half*>(smem + L::q);
    __half* ks = reinterpret_cast<__half*>(smem + L::k);
    __half* vs = reinterpret_cast<__half*>(smem + L::v);
    float* ss = reinterpret_cast<float*>(smem + L::s);
    __half* ps = reinterpret_cast<__half*>(smem + L::p);
    float* os = reinterpret_cast<float*>(smem + L::o);
    float* row_m = reinterpret_cast<float*>(smem + L::rows);
    float* row_l = row_m + kRows;
    float* row_alpha = row_l + kRows;

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int h = blockIdx.y, hk = h / (a.n_head / a.n_head_kv);
    const int64_t qt0 = int64_t(blockIdx.x) * kRows;
    const int n_q = static_cast<int>(min(int64_t(kRows), int64_t(run.n) - qt0));
    const int64_t kv0 = a.n_kv[run.first];  // key count of the run's first row
    const int32_t* table = a.block_tables + int64_t(run.first) * a.max_blocks;

    for (int i = threadIdx.x; i < kRows * kHd; i += kThreads) {
        const int r = i / kHd, d = i % kHd;
        const float x = r < n_q ? a.q[((run.first + qt0 + r) * a.n_head + h) * int64_t(kHd) + d] * scale : 0.0f;
        qs[i] = __float2half_rn(x);
        os[i] = 0.0f;
    }
    for (int r = threadIdx.x; r < kRows; r += kThreads) row_m[r] = -INFINITY, row_l[r] = 0.0f;

    const int64_t key_end = kv0 + qt0 + n_q;  // past the last row's keys
    const int64_t key_begin = a.window > 0 ? max(int64_t(0), kv0 + qt0 - a.window) : 0;
    float* sw = ss + warp * 16 * kKt;
    __half* pw = ps + warp * 16 * kKt;
    for (int64_t kt = key_begin - key_begin % kKt; kt < key_end; kt += kKt) {
        __syncthreads();  // every warp is done with the previous tile
        load_kv_tile<kKind, kEight, kHd, kKt>(a, table, kt, key_end, hk, ks, vs);
        __syncthreads();
        // Scores of this warp's 16 rows against the tile's keys.
#pragma unroll
        for (int kn = 0; kn < kKt / 16; ++kn) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
            wmma::fill_fragment(acc, 0.0f);
#pragma unroll
            for (int kd = 0; kd < kHd / 16; ++kd) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fq;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> fk;
                wmma::load_matrix_sync(fq, qs + 16 * warp * kHd + 16 * kd, kHd);
                wmma::load_matrix_sync(fk, ks + 16 * kn * kHd + 16 * kd, kHd);
                wmma::mma_sync(acc, fq, fk, acc);
            }
            wmma::store_matrix_sync(sw + 16 * kn, acc, kKt, wmma::mem_row_major);
        }
        __syncwarp();
        // Online softmax: lanes 2r and 2r + 1 share row r, half the tile's columns each.
        {
            const int r = lane / 2, half = lane % 2, qi = 16 * warp + r;
            const int64_t count = kv0 + qt0 + qi;  // keys this row sees: [count - window, count)
            const int64_t first = a.window > 0 ? count - a.window : 0;
            float mx = -INFINITY;
            for (int c = half * kKt / 2; c < (half + 1) * kKt / 2; ++c) {
                const int64_t j = kt + c;
                float s = sw[r * kKt + c];
                s = j < count && j >= first ? capped(s, a.softcap) : -INFINITY;
                sw[r * kKt + c] = s;
                mx = fmaxf(mx, s);
            }
            mx = fmaxf(mx, __shfl_xor_sync(kFullMask, mx, 1));
            const float m_old = row_m[qi], m_new = fmaxf(m_old, mx);
            const float alpha = m_new == -INFINITY ? 1.0f : (m_old == -INFINITY ? 0.0f : expf(m_old - m_new));
            float sum = 0.0f;
            for (int c = half * kKt / 2; c < (half + 1) * kKt / 2; ++c) {
                const float s = sw[r * kKt + c];
                const float e = s == -INFINITY ? 0.0f : expf(s - m_new);
                pw[r * kKt + c] = __float2half_rn(e);
                sum += e;
            }
            sum += __shfl_xor_sync(kFullMask, sum, 1);
            __syncwarp();
            if (half == 0) {
                row_m[qi] = m_new;
                row_l[qi] = row_l[qi] * alpha + sum;
                row_alpha[qi] = alpha;
            }
        }
        __syncwarp();
        float* ow = os + 16 * warp * kHd;
        for (int e = lane; e < 16 * kHd; e += 32) ow[e] *= row_alpha[16 * warp + e / kHd];
        __syncwarp();
        // O += P V for this warp's rows.
#pragma unroll
        for (int dn = 0; dn < kHd / 16; ++dn) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
            wmma::load_matrix_sync(acc, ow + 16 * dn, kHd, wmma::mem_row_major);
#pragma unroll
            for (int kk = 0; kk < kKt / 16; ++kk) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fp;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> fv;
                wmma::load_matrix_sync(fp, pw + 16 * kk, kKt);
                wmma::load_matrix_sync(fv, vs + 16 * kk * kHd + 16 * dn, kHd);
                wmma::mma_sync(acc, fp, fv, acc);
            }
            wmma::store_matrix_sync(ow + 16 * dn, acc, kHd, wmma::mem_row_major);
        }
    }
    __syncthreads();
    // A sink is one more score with no value: it joins each row's max and sum.
    const float sink = a.sinks ? a.sinks[h] : -INFINITY;
    for (int i = threadIdx.x; i < n_q * kHd; i += kThreads) {
        const int r = i / kHd, d = i % kHd;
        const float m = fmaxf(row_m[r], sink), keep = row_m[r] == -INFINITY ? 0.0f : expf(row_m[r] - m);
        const float l = row_l[r] * keep + (a.sinks ? expf(sink - m) : 0.0f);
        a.out[((run.first + qt0 + r) * a.n_head + h) * int64_t(kHd) + d] = os[r * kHd + d] * keep / l;
    }
}

template <int kHd, int kKt>
void launch_prefill(const DecodeAttentionArgs& a, const QueryRun& run, bool eight, CudaStream& s) {
    constexpr size_t smem = PrefillSmem<kHd, kKt>::bytes;
    const dim3 grid(static_cast<unsigned>((run.n + kRows - 1) / kRows), static_cast<unsigned>(a.n_head));
    const float scale = attention_scale(a);
    with_kv_kind(a.kv_type, [&](auto kind) {
        constexpr KvKind K = decltype(kind)::value;
        if (eight) {
            allow_smem(prefill_kernel<K, true, kHd, kKt>, smem);
            prefill_kernel<K, true, kHd, kKt><<<grid, kThreads, smem, s.get()>>>(a, run, scale);
        } else {
            allow_smem(prefill_kernel<K, false, kHd, kKt>, smem);
            prefill_kernel<K, false, kHd, kKt><<<grid, kThreads, smem, s.get()>>>(a, run, scale);
        }
    });
    cuda_check_launch("attention (prefill)");
}

// Shared memory a thread block may opt into on this process's device: 227 KiB on an H100, 163 on
// an A100, 99 on the RTX 30 and 40 series (which run the sm_80 build).
size_t block_smem_limit() {
    // Asked once per device a thread uses (attention is called every layer).
    thread_local int device = -1;
    thread_local size_t bytes = 0;
    int now = 0;
    cuda_check(cudaGetDevice(&now), "cudaGetDevice");
    if (now != device) {
        int b = 0;
        cuda_check(cudaDeviceGetAttribute(&b, cudaDevAttrMaxSharedMemoryPerBlockOptin, now), "cudaDeviceGetAttribute");
        device = now, bytes = static_cast<size_t>(b);
    }
    return bytes;
}

// Every head size's kernel but the widest fits 99 KiB: key tiles of 64 (64, 96), or of 32 (128)
// where 64 do not fit; heads of 256 (32 keys a tile, 141 KiB) need an H100's or A100's.
static_assert(PrefillSmem<64, 64>::bytes <= (99u << 10) && PrefillSmem<96, 64>::bytes <= (99u << 10) &&
              PrefillSmem<128, 32>::bytes <= (99u << 10));

// The key tile of the prefill kernel for `head_dim` that this device's shared memory holds; 0
// where none does or there is no kernel for the size (the decode kernel takes those rows).
int prefill_tile(int head_dim) {
    const size_t limit = block_smem_limit();
    switch (head_dim) {
        case 64: return 64;
        case 96: return 64;
        case 128: return PrefillSmem<128, 64>::bytes <= limit ? 64 : 32;
        case 256: return PrefillSmem<256, 32>::bytes <= limit ? 32 : 0;
        default: return 0;
    }
}

void prefill_run(const DecodeAttentionArgs& a, const QueryRun& run, int tile, CudaStream& s) {
    const bool eight = kv_eight_ok(a);
    switch (a.head_dim) {
        case 64: return launch_prefill<64, 64>(a, run, eight, s);
        case 96: return launch_prefill<96, 64>(a, run, eight, s);
        case 128: return tile == 64 ? launch_prefill<128, 64>(a, run, eight, s) : launch_prefill<128, 32>(a, run, eight, s);
        default: return launch_prefill<256, 32>(a, run, eight, s);
    }
}

}  // namespace

void attention(const DecodeAttentionArgs& a, CudaStream& s) {
    if (!(a.n_head_kv > 0 && a.n_head % a.n_head_kv == 0 && a.head_dim > 0 && a.max_blocks > 0))
        throw BackendError("gpu attention: heads, KV heads, head size or block table length out of range",
                           "an internal error; please report it");
    if (a.n_seq == 0) return;
    std::vector<QueryRun> runs(a.runs, a.runs + a.n_runs);
    std::sort(runs.begin(), runs.end(), [](const QueryRun& x, const QueryRun& y) { return x.first < y.first; });
    const int tile = runs.empty() || value_dim(a) != a.head_dim ? 0 : prefill_tile(a.head_dim);
    int64_t next = 0;  // rows before it are done or queued
    for (const QueryRun& run : runs) {
        if (run.first < next || run.n < 0 || int64_t(run.first) + run.n > a.n_seq)
            throw BackendError("gpu attention: query runs overlap or leave the call's rows", "an internal error; please report it");
        if (run.n == 0 || tile == 0) continue;  // left to the decode kernel
        decode_attention_rows(a, next, run.first - next, s);
        prefill_run(a, run, tile, s);
        next = int64_t(run.first) + run.n;
    }
    decode_attention_rows(a, next, a.n_seq - next, s);
}

}  // namespace strata::gpu
