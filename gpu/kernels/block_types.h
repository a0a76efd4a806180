#pragma once
// Weight type -> its block decoder (block_dot_32.h, block_dot_k.h), for the kernels' dispatch
// and the host tests.
#include <string>

#include "core/dtype.h"
#include "core/error.h"
#include "gpu/kernels/block_dot_k.h"

namespace strata::gpu::blocks {

// Calls fn(Block{}) with the decoder of quantized type `type`; throws BackendError for others.
template <class Fn>
decltype(auto) with_block(DType type, Fn&& fn) {
    switch (type) {
        case DType::Q4_0: return fn(BlockQ4_0{});
        case DType::Q4_1: return fn(BlockQ4_1{});
        case DType::Q5_0: return fn(BlockQ5_0{});
        case DType::Q5_1: return fn(BlockQ5_1{});
        case DType::Q8_0: return fn(BlockQ8_0{});
        case DType::IQ4_NL: return fn(BlockIQ4_NL{});
        case DType::MXFP4: return fn(BlockMXFP4{});
        case DType::Q2_K: return fn(BlockQ2_K{});
        case DType::Q3_K: return fn(BlockQ3_K{});
        case DType::Q4_K: return fn(BlockQ4_K{});
        case DType::Q5_K: return fn(BlockQ5_K{});
        case DType::Q6_K: return fn(BlockQ6_K{});
        case DType::Q8_K: return fn(BlockQ8_K{});
        case DType::IQ4_XS: return fn(BlockIQ4_XS{});
        default:
            throw BackendError("gpu: no block decoder for weight type " + std::string(dtype_name(type)),
                               "run this model on the CPU (--device cpu)");
    }
}

// The decode kernel reads a row a tile of up to kTileChunks chunks (eight super-blocks of 256
// values) at a time: the 16-byte words from the one at or before the tile's first byte to the one
// holding its last, copied to shared memory, where the tile starts `skip` bytes in (so it keeps
// its alignment mod 16, which the block loads assume). A tile starts at a chunk that starts a
// block. Whatever the block's size (Q4_0's 18 bytes, Q6_K's 210, MXFP4's 17) and the row's alignment.
inline constexpr int64_t kTileChunks = 64;
template <class B>
inline constexpr int kTileWords = int(kTileChunks * kActBlock / B::kValues) * B::kBytes / 16 + 2;  // room for any skip
// Bytes before chunk c of a row, c at the start of a block.
template <class B>
STRATA_HD int64_t chunk_offset(int64_t c) { return c / (B::kValues / kActBlock) * B::kBytes; }
struct Tile {
    const uint8_t* from;  // 16-byte aligned
    int skip;
    int words;
};
// Chunks [c0, c0 + n) of `row`.
template <class B>
STRATA_HD Tile tile_at(const uint8_t* row, int64_t c0, int64_t n) {
    const uint8_t* begin = row + chunk_offset<B>(c0);
    const uint8_t* from = begin - (reinterpret_cast<uintptr_t>(begin) & 15);
    return {from, int(begin - from), int((begin + chunk_offset<B>(n) - from + 15) / 16)};
}
// The tile word at p (16-byte aligned), its bytes at or past the row's end zero: the words
// before it are another row's or the tile's own, but the last row's last word may reach past
// the weights.
STRATA_HD void tile_word(const uint8_t* p, const uint8_t* row_end, uint32_t out[4]) {
    if (p + 16 <= row_end) return load_u32x4_a16(p, out);
    // Every index fixed once unrolled, so that `out` stays in registers.
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int h = 0; h < 8; ++h) {
        const uint8_t* q = p + 2 * h;
        const uint32_t half = q + 1 < row_end ? load_u16(q) : q < row_end ? uint32_t(*q) : 0u;
        out[h / 2] = h % 2 ? out[h / 2] | half << 16 : half;
    }
}

// Block-quantized weight types with a decoder (the float types F32, F16 and BF16 have kernels
// of their own).
inline bool gpu_block_type(DType type) {
    switch (type) {
        case DType::Q4_0: case DType::Q4_1: case DType::Q5_0: case DType::Q5_1: case DType::Q8_0: case DType::IQ4_NL: case DType::MXFP4:
        case DType::Q2_K: case DType::Q3_K: case DType::Q4_K: case DType::Q5_K: case DType::Q6_K: case DType::Q8_K:
        case DType::IQ4_XS:
            return true;
        default:
            return false;
    }
}

}  // namespace strata::gpu::blocks
