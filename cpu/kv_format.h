#pragma once
// The KV cache's element types and how a row of floats is written into one and read back:
// the one format the cache (runtime/kv), the CPU attention kernels and the KV rebuild share.
#include <cstdint>
#include <string_view>

#include "core/dtype.h"

namespace strata::cpu {

// F32; F16 and BF16 (half the bytes: F16 keeps 11 significant bits, BF16 8 bits with float's
// range); Q8_0 (8.5 bits a value: one f16 scale per 32 values) and Q4_0 (4.5 bits a value: 16
// levels per 32 values) with the rows' length a multiple of 32.
bool is_kv_type(DType type);
inline constexpr std::string_view kKvTypeList = "f32, f16, bf16, q8_0, q4_0";
// n floats -> one KV row of `type` (row_bytes(type, n) bytes; F16 and BF16 round to nearest
// even, Q8_0 and Q4_0 round as ggml's quantize_row_q8_0_ref and quantize_row_q4_0_ref).
void store_kv_row(DType type, const float* x, void* row, int64_t n);
// Values [i0, i0 + n) of a KV row of `type` as floats (i0 need not start a Q8_0 block).
void load_kv_values(DType type, const void* row, int64_t i0, float* dst, int64_t n);

}  // namespace strata::cpu
