#pragma once
// Tensor element types, numbered as in GGUF (ggml_type), with their block geometry.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace strata {

enum class DType : uint32_t {
    F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
    Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15, IQ4_NL = 20, IQ4_XS = 23,
    I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, BF16 = 30, MXFP4 = 39,
};

struct DTypeTraits {
    DType type;
    std::string_view name;
    int64_t block_elems;   // values per block (1 for plain types)
    size_t block_bytes;    // bytes per block
    bool computable;       // Strata has kernels for it as a weight type
};

// Traits of a GGUF type id, or nullopt when the id is not one Strata knows.
std::optional<DTypeTraits> dtype_traits(uint32_t gguf_type_id);
const DTypeTraits& traits(DType t);
std::string_view dtype_name(DType t);
// Parse "q4_0", "Q8_0", "f16", ... (case-insensitive).
std::optional<DType> dtype_from_name(std::string_view name);
// Bytes of a row of `n` values; n must be a multiple of the block size.
size_t row_bytes(DType t, int64_t n);
// Comma-separated names of every weight type with kernels, for error messages.
std::string_view computable_dtype_list();

}  // namespace strata
