// Prompt and batch matmuls (more than 16 rows) of block-quantized weights on the tensor cores,
// without expanding the weight matrix: each thread block computes a BM x BN tile of y (weight
// rows x activation rows) in steps of one 32-value chunk, dequantizing the step's weight tile
// into shared memory as half precision (block_dot_*.h values8, the CPU reference's arithmetic)
// beside the activations' half-precision tile, and multiplying them with WMMA (16x16x16, float
// accumulators). The next step's weights and activations are loaded into registers while the
// tensor cores work on this one. Edge tiles are written through shared memory with bounds.
#include <mma.h>

#include "gpu/cuda_check.h"
#include "gpu/cuda_kernels.h"
#include "gpu/kernels/block_types.h"

namespace strata::gpu {
namespace {

using namespace blocks;
namespace wmma = nvcuda::wmma;

constexpr int kBK = 32;        // one chunk of 32 values per step
constexpr int kLd = kBK + 8;   // shared-memory row stride in halves (16-byte multiple, fewer bank conflicts)
constexpr int kWarpTile = 32;  // each warp computes 32 x 32 of the tile: 2 x 2 fragments

template <int BM, int BN>
struct TileShape {
    static constexpr int kWarpsM = BM / kWarpTile, kWarpsN = BN / kWarpTile, kWarps = kWarpsM * kWarpsN;
    static constexpr int kThreads = 32 * kWarps;
    static constexpr int kWeightParts = BM * kBK / 8 / kThreads;  // 8-value parts per thread
    static constexpr int kActVecs = BN * kBK / 8 / kThreads;      // 16-byte vectors per thread
    static_assert(kWeightParts >= 1 && kActVecs >= 1, "tile too small for its threads");
};

// This thread's share of one step: its weight parts dequantized (as halves) and its
// activation vectors, held in registers until they are stored to shared memory.
template <class B, int BM, int BN>
struct StepLoads {
    using S = TileShape<BM, BN>;
    uint4 w[S::kWeightParts];
    uint4 x[S::kActVecs];

    __device__ void load(const uint8_t* w_base, uint64_t row_bytes, int64_t r0, int64_t n_rows, const __half* x16,
                         int64_t t0, int64_t n_tok, int64_t n_cols, int64_t c) {
#pragma unroll
        for (int i = 0; i < S::kWeightParts; ++i) {
            const int p = threadIdx.x + i * S::kThreads, rr = p / 4, part = p % 4;
            float v[8] = {};
            if (r0 + rr < n_rows) B::values8(w_base + (r0 + rr) * row_bytes, c, part, v);
            __half2 h[4];
#pragma unroll
            for (int j = 0; j < 4; ++j) h[j] = __floats2half2_rn(v[2 * j], v[2 * j + 1]);
            w[i] = *reinterpret_cast<const uint4*>(h);
        }
#pragma unroll
        for (int i = 0; i < S::kActVecs; ++i) {
            const int p = threadIdx.x + i * S::kThreads, tt = p / 4, part = p % 4;
            x[i] = t0 + tt < n_tok ? *reinterpret_cast<const uint4*>(x16 + (t0 + tt) * n_cols + kBK * c + 8 * part)
                                   : make_uint4(0, 0, 0, 0);
        }
    }
    __device__ void store(__half* ws, __half* xs) const {
#pragma unroll
        for (int i = 0; i < S::kWeightParts; ++i) {
            const int p = threadIdx.x + i * S::kThreads;
            *reinterpret_cast<uint4*>(ws + (p / 4) * kLd + 8 * (p % 4)) = w[i];
        }
#pragma unroll
        for (int i = 0; i < S::kActVecs; ++i) {
            const int p = threadIdx.x + i * S::kThreads;
            *reinterpret_cast<uint4*>(xs + (p / 4) * kLd + 8 * (p % 4)) = x[i];
        }
    }
};

template <class B, int BM, int BN>
__global__ void __launch_bounds__(TileShape<BM, BN>::kThreads)
    matmul_tiles_kernel(const uint8_t* __restrict__ w, uint64_t row_bytes, const __half* __restrict__ x16, float* y,
                        int64_t ldy, int64_t n_rows, int64_t n_cols, int64_t n_tok, bool accumulate) {
    using S = TileShape<BM, BN>;
    __shared__ __align__(128) __half ws[BM * kLd];
    __shared__ __align__(128) __half xs[BN * kLd];
    __shared__ __align__(128) float staging[S::kWarps][16 * 16];
    const int64_t r0 = int64_t(blockIdx.x) * BM, t0 = int64_t(blockIdx.y) * BN;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wm = warp / S::kWarpsN, wn = warp % S::kWarpsN;

    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

    const int64_t n_steps = n_cols / kBK;
    StepLoads<B, BM, BN> next;
    next.load(w, row_bytes, r0, n_rows, x16, t0, n_tok, n_cols, 0);
    for (int64_t c = 0; c < n_steps; ++c) {
        __syncthreads();  // the previous step's fragments are loaded
        next.store(ws, xs);
        __syncthreads();
        if (c + 1 < n_steps) next.load(w, row_bytes, r0, n_rows, x16, t0, n_tok, n_cols, c + 1);
#pragma unroll
        for (int kk = 0; kk < kBK; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a[2];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> b[2];
#pragma unroll
            for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(a[i], ws + (wm * kWarpTile + 16 * i) * kLd + kk, kLd);
#pragma unroll
            for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(b[j], xs + (wn * kWarpTile + 16 * j) * kLd + kk, kLd);
#pragma unroll
            for (int i = 0; i < 2; ++i)
#pragma unroll
                for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
        }
    }

    // Each fragment through the warp's staging square: element (row i, token j) at i + 16 j.
    float* st = staging[warp];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) {
            wmma::store_matrix_sync(st, acc[i][j], 16, wmma::mem_col_major);
            __syncwarp();
            const int64_t fr = r0 + wm * kWarpTile + 16 * i, ft = t0 + wn * kWarpTile + 16 * j;
            for (int e = lane; e < 256; e += 32) {
                const int64_t r = fr + e % 16, t = ft + e / 16;
                if (r < n_rows && t < n_tok) {
                    float* dst = y + t * ldy + r;
                    *dst = accumulate ? *dst + st[e] : st[e];
                }
            }
            __syncwarp();
        }
}

template <class B, int BM, int BN>
void launch(const WeightMatmul& m, const void* x16, CudaStream& s) {
    const dim3 grid(static_cast<unsigned>((m.n_rows + BM - 1) / BM), static_cast<unsigned>((m.n_tok + BN - 1) / BN));
    matmul_tiles_kernel<B, BM, BN><<<grid, TileShape<BM, BN>::kThreads, 0, s.get()>>>(
        static_cast<const uint8_t*>(m.w), row_bytes(m.type, m.n_cols), static_cast<const __half*>(x16), m.y, m.ldy,
        m.n_rows, m.n_cols, m.n_tok, m.accumulate);
}

}  // namespace

void matmul_tiles(const WeightMatmul& m, const void* x16, CudaStream& s) {
    if (m.n_rows == 0 || m.n_tok == 0) return;
    with_block(m.type, [&](auto block) {
        using B = decltype(block);
        // Wider tiles reuse each dequantized weight for more activation rows once there are
        // enough of them to fill the tile.
        if (m.n_tok > 64)
            launch<B, 128, 64>(m, x16, s);
        else
            launch<B, 64, 64>(m, x16, s);
    });
    cuda_check_launch("matmul_tiles");
}

}  // namespace strata::gpu
