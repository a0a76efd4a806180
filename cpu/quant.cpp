#include "cpu/quant.h"

#include <array>
#include <string>

#include "cpu/cpu_features.h"
#include "cpu/quant_ref.h"
#include "runtime/core/error.h"

namespace strata::cpu {
namespace {

constexpr int kTypeSlots = 64;  // GGUF type ids are small; BF16 is 30

// One complete table per path: a path's missing entries come from the next slower path, so a
// lookup never needs a second try.
struct PathTables {
    std::array<std::array<QuantKernels, kTypeSlots>, 3> by_path{};
    PathTables() {
        for (int id = 0; id < kTypeSlots; ++id) {
            const auto t = static_cast<DType>(id);
            if (!dtype_traits(id)) continue;
            QuantKernels k = ref_kernels(t);
            by_path[0][id] = k;
            auto merge = [&](QuantKernels fast) {
                if (fast.dequantize) k.dequantize = fast.dequantize;
                if (fast.vec_dot) k.vec_dot = fast.vec_dot;
                if (fast.quantize) k.quantize = fast.quantize;
            };
            if (path_supported(CpuPath::Avx2)) merge(avx2_kernels(t));
            by_path[1][id] = k;
            if (path_supported(CpuPath::Avx512)) merge(avx512_kernels(t));
            by_path[2][id] = k;
        }
    }
};

const QuantKernels& kernels(DType t) {
    static const PathTables tables;
    const auto id = static_cast<uint32_t>(t);
    static const QuantKernels none{};
    if (id >= kTypeSlots) return none;
    return tables.by_path[static_cast<int>(active_path())][id];
}

[[noreturn]] void no_kernel(DType t, const char* what) {
    throw BackendError("cpu: no " + std::string(what) + " kernel for type " + std::string(dtype_name(t)),
                       "CPU weight types: " + std::string(computable_dtype_list()));
}

}  // namespace

bool has_kernels(DType weight_type) {
    switch (weight_type) {
        case DType::F32: case DType::F16: case DType::BF16:
        case DType::Q4_0: case DType::Q4_1: case DType::Q5_0: case DType::Q5_1: case DType::Q8_0:
        case DType::Q4_K: case DType::Q5_K: case DType::Q6_K: case DType::Q8_K:
            return true;
        default:
            return false;
    }
}

DType activation_type_for(DType weight_type) {
    switch (weight_type) {
        case DType::F32: case DType::F16: return DType::F32;
        case DType::BF16: return DType::BF16;
        case DType::Q4_0: case DType::Q4_1: case DType::Q5_0: case DType::Q5_1: case DType::Q8_0:
            return DType::Q8_0;
        case DType::Q4_K: case DType::Q5_K: case DType::Q6_K: case DType::Q8_K: return DType::Q8_K;
        default: no_kernel(weight_type, "vec_dot");
    }
}

size_t activation_row_bytes(DType weight_type, int64_t n) { return row_bytes(activation_type_for(weight_type), n); }

void quantize_activations(DType act_type, const float* x, void* dst, int64_t n) {
    const QuantKernels& k = kernels(act_type);
    if (!k.quantize) no_kernel(act_type, "quantize");
    STRATA_ASSERT(n % traits(act_type).block_elems == 0);
    k.quantize(x, dst, n);
}

float vec_dot(DType weight_type, const void* weight_row, const void* acts, int64_t n) {
    float out = 0.0f;
    vec_dot_rows(weight_type, weight_row, acts, 0, 1, n, &out);
    return out;
}

void vec_dot_rows(DType weight_type, const void* weight_row, const void* acts, size_t act_stride, int n_tok,
                  int64_t n, float* out) {
    const QuantKernels& k = kernels(weight_type);
    if (!k.vec_dot) no_kernel(weight_type, "vec_dot");
    STRATA_ASSERT(n % traits(weight_type).block_elems == 0);
    const auto* a = static_cast<const uint8_t*>(acts);
    for (int t = 0; t < n_tok; t += kMaxTokens) {
        const int nt = n_tok - t < kMaxTokens ? n_tok - t : kMaxTokens;
        k.vec_dot(weight_row, a + t * act_stride, act_stride, nt, n, out + t);
    }
}

void dequantize_row(DType type, const void* src, float* dst, int64_t n) {
    const QuantKernels& k = kernels(type);
    if (!k.dequantize) no_kernel(type, "dequantize");
    STRATA_ASSERT(n % traits(type).block_elems == 0);
    k.dequantize(src, dst, n);
}

}  // namespace strata::cpu
