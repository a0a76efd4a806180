#pragma once
// Internal to cpu/: entry points of the x86 matmul kernel files, and per-thread scratch memory.
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "cpu/quant_ref.h"

namespace strata::cpu {

// A 64-byte aligned buffer of at least `bytes`, owned by the calling thread, one per `slot`
// (0..5). It grows and never shrinks, so steady-state kernels allocate nothing. Valid until the
// same thread asks for the same slot again; kernels must not call each other while holding one.
uint8_t* thread_scratch(int slot, size_t bytes);

// gemm_avx512.cpp: VNNI kernels for block-quantized weights (nullptr: no kernel for the type).
MatmulRowsFn avx512_vnni_matmul(DType type);
// gemm_avx512.cpp: rewrites the full 16-row tiles of n_rows weight rows (stride bytes apart) in
// place into the order the VNNI/AMX packers load them (nullptr: the type has no packer).
using TileWeightsFn = void (*)(uint8_t* w, size_t stride, int64_t n_rows);
TileWeightsFn avx512_tile_weights(DType type);
// The 16 rows of the tiled tile at `tile` as floats, as dequantize_row gives them: row r at
// dst + r * ld.
using TiledRowsFn = void (*)(const uint8_t* tile, size_t stride, int64_t n_cols, float* dst, size_t ld);
TiledRowsFn avx512_tiled_rows(DType type);
// untile_avx512.cpp: dst's n_pairs pairs of bytes, pair i the two bytes at src + pair_at[i]
// (each gather reads two bytes beyond the pair it takes).
void avx512_gather_pairs(const uint8_t* src, const uint32_t* pair_at, size_t n_pairs, uint8_t* dst);
// The same a byte at a time, where a layout splits pairs (MXFP4's 17-byte blocks): byte i the
// one at src + byte_at[i] (each gather reads three bytes beyond it).
void avx512_gather_bytes(const uint8_t* src, const uint32_t* byte_at, size_t n_bytes, uint8_t* dst);
// gemm_amx.cpp: AMX-INT8 prefill for block-quantized weights; falls back to `vnni` below
// kAmxMinTokens, where AMX does not pay (nullptr: no AMX kernel for the type).
MatmulRowsFn amx_matmul(DType type);
inline constexpr int64_t kAmxMinTokens = 16;  // below, tiles would be mostly padding
// Whether this CPU and OS let the process use AMX tiles (asks the kernel for permission once;
// STRATA_AMX=0 says no).
bool amx_usable();
// amx_usable() and not switched off by set_amx_enabled(false) (tests compare AMX with VNNI).
bool amx_enabled();
void set_amx_enabled(bool on);

// act_avx512.cpp: swiglu (norm_rope_act.h) with a vector e^x.
void swiglu_avx512(float* gate, const float* up, int64_t n);

}  // namespace strata::cpu
