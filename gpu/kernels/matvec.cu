// Decode matmuls of 1 to 16 rows, the design of llama.cpp's mmvq: activations quantized once
// (prepare_input.cu: the CPU's two-level Q8x2 format, byte for byte), then every weight row
// read once for all the rows, its quants meeting the activations in dp4a instructions on
// words of four values (block_dot_32.h, block_dot_k.h), partial sums reduced across the warps
// of a row in a fixed order. A row's arithmetic does not depend on how many rows the call has,
// so each row gets the bits it would get alone (Device::kRowWiseRows). Up to three weights of
// one type and width over the same input (a layer's q, k and v) share a launch, each row summed
// as in a launch of its own.
#include <algorithm>
#include <array>
#include <atomic>
#include <span>
#include <type_traits>

#include "core/error.h"
#include "gpu/cuda_check.h"
#include "gpu/kernels/block_types.h"
#include "gpu/cuda_kernels.h"
#include "gpu/kernels/float_weights.cuh"
#include "gpu/kernels/reduce.cuh"
#include "gpu/kernels/warp_tiles.h"

namespace strata::gpu {
namespace {

using namespace blocks;

constexpr int kThreads = 32 * kMatvecWarps;

// The weights one launch takes: matvec's products of one input, of one type and width (a layer's
// q, k and v), as work items (warp_tiles.h). Their weights are the kernel's own pointer
// parameters, w0 to w2, which the compiler takes to be read-only global memory (__restrict__:
// non-coherent loads), as it takes no pointer in a struct; their outputs are here.
struct MatvecOut {
    float* y;
    int64_t ldy;
    bool accumulate;
};
struct MatvecParts {
    MatvecOut out[kDeviceLaunchProducts];
    LaunchItems items;
};

// Part i's output, chosen with indices fixed at compile time (so that it is read from the kernel's
// parameters, not copied to local memory), read where it is used, its pointer said to be global
// memory as a kernel's own pointer parameters are taken to be (else its stores are generic ones).
__device__ __forceinline__ MatvecOut part_out(const MatvecParts& ps, int i) {
    MatvecOut p = ps.out[0];
#pragma unroll
    for (int k = 1; k < kDeviceLaunchProducts; ++k)
        if (i == k) p = ps.out[k];
    __builtin_assume(__isGlobal(p.y));
    return p;
}
// Part i's weights, of the kernel's parameters w0 to w2.
template <class T>
__device__ __forceinline__ const T* part_weights(int i, const T* w0, const T* w1, const T* w2) {
    return i == 0 ? w0 : i == 1 ? w1 : w2;
}

// One weight row per kWarpsPerRow warps (4 / kWarpsPerRow rows per thread block): each thread's
// sums for the kCols rows of x, reduced over the row's warps in a fixed order. A thread block
// that stores rows again and again alternates `parity`, so that no warp writes its partial sums
// over ones another warp has yet to read.
template <int kWarpsPerRow, int kCols>
__device__ __forceinline__ void store_rows(float (&acc)[kCols], int64_t r, const MatvecParts& ps, int part, int parity = 0) {
    __shared__ float partials[2][kMatvecWarps][kCols];
    auto& partial = partials[parity];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
    for (int t = 0; t < kCols; ++t) acc[t] = warp_sum(acc[t]);
    if (lane == 0)
#pragma unroll
        for (int t = 0; t < kCols; ++t) partial[warp][t] = acc[t];
    __syncthreads();
    if (warp % kWarpsPerRow != 0 || lane >= kCols || r >= ps.items.rows(part)) return;
    const MatvecOut p = part_out(ps, part);
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < kWarpsPerRow; ++i) s += partial[warp + i][lane];
    float* dst = p.y + int64_t(lane) * p.ldy + r;
    *dst = p.accumulate ? *dst + s : s;
}

// Columns of x one dot_chunk call takes: a call of more rows takes them this many at a time
// (each column's sums are the same either way), so that no more activation rows' pointers are
// live at once.
constexpr int kColGroup = 8;

// B::dot_chunk of weight chunk c (of the tile at w) with activation block c0 + c of each
// of kCols activation rows, from the row at act on, act_stride bytes apart.
template <class B, int kCols>
__device__ __forceinline__ void dot_cols(const uint8_t* __restrict__ w, int64_t c, const uint8_t* act, uint64_t act_stride,
                                         int64_t n_cols, int64_t c0, bool lo, float* acc) {
    constexpr int kNow = kCols < kColGroup ? kCols : kColGroup;
    ActRow a[kNow];
#pragma unroll
    for (int t = 0; t < kNow; ++t) a[t] = act_from(act_row(act + t * act_stride, n_cols), c0);
    B::template dot_chunk<kNow>(w, c, a, lo, acc);
    if constexpr (kCols > kColGroup)
        dot_cols<B, kCols - kColGroup>(w, c, act + kColGroup * act_stride, act_stride, n_cols, c0, lo, acc + kColGroup);
}


// Block-quantized rows, kWarpsPerRow warps a row: warp w of a row copies its tiles w,
// w + kWarpsPerRow, ... of 64 chunks into shared memory with 16-byte loads, consecutive lanes
// reading consecutive words (a warp's load is 512 bytes of the row), then each lane takes chunks
// lane, lane + 32, ... of the tile. Any block size and row alignment (Q6_K's 210-byte
// super-blocks, MXFP4's 17-byte blocks): a tile reads from the word at or before its first byte,
// which matmul's check that the weights start 16-byte aligned (cuda_matmul.cpp) keeps within
// them. A lane that read its own blocks' bytes instead (16-byte words 144 bytes apart across the
// warp for Q4_0) made each load touch a sector per lane: the H200 measured that at 765 GB/s
// where this reads Q6_K at 1637.
//
// A warp's next tile is in flight while it works on this one, across rows too: a launch has no
// more thread blocks than the device holds at once, and each loops over the launch's work items
// (a thread block's rows), so the first tile of a warp's next row loads while it finishes this
// row and its sums are reduced. A warp with one tile a row (Q4_0 rows of 4096 values) otherwise
// waited on every load with nothing to do: the H200 read Q4_0 at 0.32 of its copy rate.
template <class B, int kWarpsPerRow, int kCols>
__global__ void __launch_bounds__(kThreads)
    matvec_tile_kernel(const uint8_t* __restrict__ w0, const uint8_t* __restrict__ w1, const uint8_t* __restrict__ w2,
                       const MatvecParts parts, uint64_t row_bytes, const uint8_t* __restrict__ act, uint64_t act_stride,
                       int64_t n_cols, bool lo) {
    constexpr int kWords = kTileWords<B>, kLoads = (kWords + 31) / 32;
    __shared__ uint4 tiles[kMatvecWarps][kWords];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t chunks = n_cols / kActBlock;
    const WarpTiles tiles_of{parts.items, gridDim.x, kWarpsPerRow, warp, chunks};
    auto row_of = [&](const WarpTile& t) { return part_weights(t.part, w0, w1, w2) + t.row * row_bytes; };
    auto tile_of = [&](const WarpTile& t) { return tile_at<B>(row_of(t), t.c0, min(kTileChunks, chunks - t.c0)); };
    uint32_t next[kLoads][4];
    auto fetch = [&](const WarpTile& t) {
        const Tile tl = tile_of(t);
        const uint8_t* end = row_of(t) + row_bytes;
#pragma unroll
        for (int i = 0; i < kLoads; ++i)
            if (lane + 32 * i < tl.words) tile_word(tl.from + 16 * (lane + 32 * i), end, next[i]);
    };

    const unsigned items = parts.items.items;
    WarpTile at = tiles_of.first(blockIdx.x);
    if (at.item < items) fetch(at);
    int parity = 0;
    // Work items are uniform over the thread block (store_rows synchronizes it), tiles over the warp.
    for (unsigned item = blockIdx.x; item < items; item += gridDim.x, parity ^= 1) {
        float acc[kCols];
#pragma unroll
        for (int t = 0; t < kCols; ++t) acc[t] = 0.0f;
        while (at.item == item) {
            const WarpTile cur = at;
            const Tile t = tile_of(cur);
#pragma unroll
            for (int i = 0; i < kLoads; ++i)
                if (lane + 32 * i < t.words) tiles[warp][lane + 32 * i] = make_uint4(next[i][0], next[i][1], next[i][2], next[i][3]);
            __syncwarp();
            at = tiles_of.after(cur);
            if (at.item < items) fetch(at);
            const uint8_t* staged = reinterpret_cast<const uint8_t*>(tiles[warp]) + t.skip;
            const int64_t n = min(kTileChunks, chunks - cur.c0);
            for (int64_t c = lane; c < n; c += 32) dot_cols<B, kCols>(staged, c, act, act_stride, n_cols, cur.c0, lo, acc);
            __syncwarp();
        }
        const ItemPart ip = parts.items.part_of(item);
        store_rows<kWarpsPerRow, kCols>(acc, item_row(ip.block, warp, kWarpsPerRow), parts, ip.part, parity);
    }
}

// Float weights (F32, F16, BF16) meet float activations: 8 values a step with 16-byte loads
// when rows allow it (kVec, weight_values8), else one (weight_value).
template <class T, bool kVec, int kWarpsPerRow, int kCols>
__global__ void __launch_bounds__(kThreads)
    matvec_float_kernel(const T* __restrict__ w0, const T* __restrict__ w1, const T* __restrict__ w2, const MatvecParts parts,
                        const float* __restrict__ x, int64_t n_cols) {
    constexpr int kRowThreads = 32 * kWarpsPerRow;
    const ItemPart at_part = parts.items.part_of(blockIdx.x);
    const int warp = threadIdx.x / 32;
    const int64_t r = item_row(at_part.block, warp, kWarpsPerRow);
    const int sub = (warp % kWarpsPerRow) * 32 + int(threadIdx.x % 32);  // the thread's place among its row's
    float acc[kCols];
#pragma unroll
    for (int t = 0; t < kCols; ++t) acc[t] = 0.0f;
    if (r < parts.items.rows(at_part.part)) {
        const T* row = part_weights(at_part.part, w0, w1, w2) + r * n_cols;
        if constexpr (kVec) {
            for (int64_t k = 8 * int64_t(sub); k < n_cols; k += 8 * kRowThreads) {
                float wv[8];
                weight_values8(row + k, wv);
#pragma unroll
                for (int t = 0; t < kCols; ++t) {
                    const float4 a = *reinterpret_cast<const float4*>(x + t * n_cols + k);
                    const float4 b = *reinterpret_cast<const float4*>(x + t * n_cols + k + 4);
                    acc[t] += wv[0] * a.x + wv[1] * a.y + wv[2] * a.z + wv[3] * a.w + wv[4] * b.x + wv[5] * b.y +
                              wv[6] * b.z + wv[7] * b.w;
                }
            }
        } else {
            for (int64_t k = sub; k < n_cols; k += kRowThreads) {
                const float wv = weight_value(row + k);
#pragma unroll
                for (int t = 0; t < kCols; ++t) acc[t] += wv * x[t * n_cols + k];
            }
        }
    }
    store_rows<kWarpsPerRow, kCols>(acc, r, parts, at_part.part);
}

// Warps per float weight row from the row's width alone (never from the row count, so that a
// row's sum is reduced the same way in every call): 4 for rows of at least 4096 values.
int warps_per_row(int64_t n_cols) { return n_cols >= 4096 ? 4 : n_cols >= 2048 ? 2 : 1; }
// For the tile kernel, from the row's tiles: 1, 2 for 2-3, 4 for 4 or more (a warp takes every
// 4th or 2nd tile).
int tile_warps_per_row(int64_t n_cols) {
    const int64_t tiles = (n_cols / kActBlock + kTileChunks - 1) / kTileChunks;
    return tiles >= 4 ? 4 : tiles >= 2 ? 2 : 1;
}

// Calls fn(integral_constant<kWarpsPerRow>, integral_constant<kCols>) for the runtime values.
template <class Fn>
void with_shape(int warps, int64_t n_tok, Fn&& fn) {
    auto cols = [&](auto warps) {
        switch (n_tok) {
            case 1: return fn(warps, std::integral_constant<int, 1>{});
            case 2: return fn(warps, std::integral_constant<int, 2>{});
            case 3: return fn(warps, std::integral_constant<int, 3>{});
            case 4: return fn(warps, std::integral_constant<int, 4>{});
            case 5: return fn(warps, std::integral_constant<int, 5>{});
            case 6: return fn(warps, std::integral_constant<int, 6>{});
            case 7: return fn(warps, std::integral_constant<int, 7>{});
            case 8: return fn(warps, std::integral_constant<int, 8>{});
            case 9: return fn(warps, std::integral_constant<int, 9>{});
            case 10: return fn(warps, std::integral_constant<int, 10>{});
            case 11: return fn(warps, std::integral_constant<int, 11>{});
            case 12: return fn(warps, std::integral_constant<int, 12>{});
            case 13: return fn(warps, std::integral_constant<int, 13>{});
            case 14: return fn(warps, std::integral_constant<int, 14>{});
            case 15: return fn(warps, std::integral_constant<int, 15>{});
            case 16: return fn(warps, std::integral_constant<int, 16>{});
            default: throw BackendError("gpu: a decode matmul takes 1 to 16 rows", "an internal error; please report it");
        }
    };
    switch (warps) {
        case 4: return cols(std::integral_constant<int, 4>{});
        case 2: return cols(std::integral_constant<int, 2>{});
        default: return cols(std::integral_constant<int, 1>{});
    }
}

// The launch's parts, rows_per_block rows of each a work item.
MatvecParts parts_of(std::span<const WeightMatmul> ms, int64_t rows_per_block) {
    MatvecParts ps{};
    ps.items.n = static_cast<int>(ms.size());
    for (size_t i = 0; i < ms.size(); ++i) {
        const WeightMatmul& m = ms[i];
        ps.out[i] = {m.y, m.ldy, m.accumulate};
        ps.items.n_rows[i] = m.n_rows;
        ps.items.first[i] = ps.items.items;
        ps.items.items += static_cast<unsigned>((m.n_rows + rows_per_block - 1) / rows_per_block);
    }
    return ps;
}

// A figure of device `dev`, asked once a device (ordinals past the table: every time).
template <class Ask>
int per_device(std::array<std::atomic<int>, 16>& known, int dev, Ask ask) {
    std::atomic<int>* at = dev >= 0 && dev < int(known.size()) ? &known[size_t(dev)] : nullptr;
    int n = at ? at->load(std::memory_order_relaxed) : 0;
    if (n > 0) return n;
    n = std::max(ask(dev), 1);
    if (at) at->store(n, std::memory_order_relaxed);
    return n;
}

// Device `dev`'s multiprocessors.
int multiprocessors(int dev) {
    static std::array<std::atomic<int>, 16> known{};
    return per_device(known, dev, [](int dev) {
        int n = 0;
        cuda_check(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev), "multiprocessor count");
        return n;
    });
}
// The thread blocks of matvec_tile_kernel<B, W, C> the current device runs at once (as many as
// fit on a multiprocessor, by its registers and shared memory, times the multiprocessors): the
// kernel's grid at most, its blocks looping over the launch's work items.
template <class B, int W, int C>
unsigned resident_tile_blocks() {
    static std::array<std::atomic<int>, 16> per_sm{};
    int dev = 0;
    cuda_check(cudaGetDevice(&dev), "cudaGetDevice");
    const int blocks = per_device(per_sm, dev, [](int) {
        int n = 0;
        cuda_check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, matvec_tile_kernel<B, W, C>, kThreads, 0), "occupancy of matvec");
        return n;
    });
    return static_cast<unsigned>(multiprocessors(dev) * blocks);
}

// Part i's weights for the kernel's w0 to w2 (the first's where the launch has fewer parts: never read).
template <class T>
const T* weights_at(std::span<const WeightMatmul> ms, size_t i) {
    return static_cast<const T*>(ms[i < ms.size() ? i : 0].w);
}

template <class T>
void matvec_float(std::span<const WeightMatmul> ms, CudaStream& s) {
    const T *w0 = weights_at<T>(ms, 0), *w1 = weights_at<T>(ms, 1), *w2 = weights_at<T>(ms, 2);
    const WeightMatmul& m = ms[0];
    bool vec = m.n_cols % 8 == 0 && reinterpret_cast<uintptr_t>(m.x) % 16 == 0;
    for (const WeightMatmul& p : ms) vec = vec && reinterpret_cast<uintptr_t>(p.w) % 16 == 0;
    with_shape(warps_per_row(m.n_cols), m.n_tok, [&](auto warps, auto cols) {
        constexpr int W = decltype(warps)::value, C = decltype(cols)::value;
        const MatvecParts parts = parts_of(ms, kMatvecWarps / W);
        const unsigned blocks = parts.items.items;
        if (blocks == 0) return;
        if (vec) matvec_float_kernel<T, true, W, C><<<blocks, kThreads, 0, s.get()>>>(w0, w1, w2, parts, m.x, m.n_cols);
        else matvec_float_kernel<T, false, W, C><<<blocks, kThreads, 0, s.get()>>>(w0, w1, w2, parts, m.x, m.n_cols);
    });
    cuda_check_launch("matvec (float weights)");
}

}  // namespace

void matvec(std::span<const WeightMatmul> ms, const void* acts, CudaStream& s) {
    STRATA_ASSERT(!ms.empty() && ms.size() <= size_t(kDeviceLaunchProducts));
    const WeightMatmul& m = ms[0];
    for (const WeightMatmul& p : ms) STRATA_ASSERT(p.type == m.type && p.n_cols == m.n_cols && p.n_tok == m.n_tok);
    if (m.n_tok == 0) return;
    switch (m.type) {
        case DType::F32: return matvec_float<float>(ms, s);
        case DType::F16: return matvec_float<__half>(ms, s);
        case DType::BF16: return matvec_float<__nv_bfloat16>(ms, s);
        default: break;
    }
    const auto *w0 = weights_at<uint8_t>(ms, 0), *w1 = weights_at<uint8_t>(ms, 1), *w2 = weights_at<uint8_t>(ms, 2);
    const auto* a = static_cast<const uint8_t*>(acts);
    const uint64_t rb = row_bytes(m.type, m.n_cols), ab = act_row_bytes(m.n_cols);
    with_block(m.type, [&](auto block) {
        using B = decltype(block);
        with_shape(tile_warps_per_row(m.n_cols), m.n_tok, [&](auto warps, auto cols) {
            constexpr int W = decltype(warps)::value, C = decltype(cols)::value;
            const MatvecParts parts = parts_of(ms, kMatvecWarps / W);
            if (parts.items.items == 0) return;
            const unsigned grid = std::min(parts.items.items, resident_tile_blocks<B, W, C>());
            matvec_tile_kernel<B, W, C><<<grid, kThreads, 0, s.get()>>>(w0, w1, w2, parts, rb, a, ab, m.n_cols, m.two_level_acts);
        });
    });
    cuda_check_launch("matvec");
}

}  // namespace strata::gpu
