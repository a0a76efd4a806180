#include "cpu/quant.h"

#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "core/error.h"
#include "cpu/cpu_features.h"
#include "cpu/gemm_x86.h"
#include "cpu/quant_ref.h"

namespace strata::cpu {
namespace {

constexpr int kTypeSlots = 64;  // GGUF type ids are small; BF16 is 30

// One complete table per path: a path's missing entries come from the next slower path, so a
// lookup never needs a second try.
struct PathTables {
    std::array<std::array<QuantKernels, kTypeSlots>, 3> by_path{};
    std::array<std::array<ActKernels, 3>, 3> act{};
    PathTables() {
        for (int id = 0; id < kTypeSlots; ++id) {
            const auto t = static_cast<DType>(id);
            if (!dtype_traits(id)) continue;
            QuantKernels k = ref_kernels(t);
            by_path[0][id] = k;
            auto merge = [&](QuantKernels fast) {
                if (fast.dequantize) k.dequantize = fast.dequantize;
                if (fast.matmul_rows) k.matmul_rows = fast.matmul_rows;
            };
            if (path_supported(CpuPath::Avx2)) merge(avx2_kernels(t));
            by_path[1][id] = k;
            if (path_supported(CpuPath::Avx512)) merge(avx512_kernels(t));
            by_path[2][id] = k;
        }
        for (ActFormat f : {ActFormat::F32, ActFormat::Q8x2, ActFormat::Q8}) {
            const int i = static_cast<int>(f);
            ActKernels k = ref_act_kernels(f);
            act[0][i] = k;
            if (path_supported(CpuPath::Avx2))
                if (auto fast = avx2_act_kernels(f); fast.quantize) k = fast;
            act[1][i] = k;
            if (path_supported(CpuPath::Avx512))
                if (auto fast = avx512_act_kernels(f); fast.quantize) k = fast;
            act[2][i] = k;
        }
    }
};
const PathTables& tables() {
    static const PathTables t;
    return t;
}

const QuantKernels& kernels(DType t) {
    const auto id = static_cast<uint32_t>(t);
    static const QuantKernels none{};
    if (id >= kTypeSlots) return none;
    return tables().by_path[static_cast<int>(active_path())][id];
}

[[noreturn]] void no_kernel(DType t, const char* what) {
    throw BackendError("cpu: no " + std::string(what) + " kernel for type " + std::string(dtype_name(t)),
                       "CPU weight types: " + std::string(computable_dtype_list()));
}

[[noreturn]] void tiled_off_avx512() {
    throw BackendError("cpu: weights were tiled for the avx512 kernels, but the " + std::string(path_name(active_path())) +
                           " path is active",
                       "choose the CPU path (STRATA_CPU) before loading the model");
}
}  // namespace

bool has_kernels(DType weight_type) {
    const auto tr = dtype_traits(static_cast<uint32_t>(weight_type));
    return tr && tr->computable;
}

ActFormat act_format_for(DType weight_type) {
    if (!has_kernels(weight_type)) no_kernel(weight_type, "matmul");
    const bool is_float = weight_type == DType::F32 || weight_type == DType::F16 || weight_type == DType::BF16;
    return is_float ? ActFormat::F32 : ActFormat::Q8x2;
}

size_t act_row_bytes(DType weight_type, int64_t n) {
    return act_format_for(weight_type) == ActFormat::F32 ? static_cast<size_t>(n) * sizeof(float) : act_q8x2_bytes(n);
}

void quantize_activations(ActFormat fmt, const float* x, void* dst, int64_t n) {
    STRATA_ASSERT(fmt == ActFormat::F32 || n % kActBlock == 0);
    tables().act[static_cast<int>(active_path())][static_cast<int>(fmt)].quantize(x, dst, n);
}

bool tile_weights(DType weight_type, void* weights, int64_t n_rows, int64_t n_cols) {
    if (active_path() != CpuPath::Avx512) return false;
    const TileWeightsFn fn = avx512_tile_weights(weight_type);
    if (!fn) return false;
    STRATA_ASSERT(n_cols % traits(weight_type).block_elems == 0);
    fn(static_cast<uint8_t*>(weights), row_bytes(weight_type, n_cols), n_rows);
    return true;
}

void dequantize_tiled_rows(DType weight_type, const void* weights, int64_t n_rows, int64_t n_cols, int64_t row0,
                           int64_t n, float* dst) {
    const size_t stride = row_bytes(weight_type, n_cols);
    const auto* w = static_cast<const uint8_t*>(weights);
    const int64_t tiled_rows = n_rows / kRowTile * kRowTile;  // a partial last tile stays in the file layout
    const TiledRowsFn fn = active_path() == CpuPath::Avx512 ? avx512_tiled_rows(weight_type) : nullptr;
    for (int64_t r = row0; r < row0 + n;) {
        float* out = dst + (r - row0) * n_cols;
        if (r >= tiled_rows) {
            dequantize_row(weight_type, w + r * stride, out, n_cols);
            ++r;
            continue;
        }
        if (!fn) tiled_off_avx512();
        const int64_t t0 = r / kRowTile * kRowTile, take = std::min(t0 + kRowTile, row0 + n) - r;
        if (r == t0 && take == kRowTile) {
            fn(w + t0 * stride, stride, n_cols, out, n_cols);
        } else {  // part of a tile: all 16 rows aside, then the wanted ones
            thread_local std::vector<float> whole;
            whole.resize(kRowTile * n_cols);
            fn(w + t0 * stride, stride, n_cols, whole.data(), n_cols);
            std::copy_n(whole.data() + (r - t0) * n_cols, take * n_cols, out);
        }
        r += take;
    }
}

void matmul_rows(DType weight_type, const MatmulJob& job, int64_t r0, int64_t r1) {
    const QuantKernels& k = kernels(weight_type);
    if (!k.matmul_rows) no_kernel(weight_type, "matmul");
    STRATA_ASSERT(job.n_cols % traits(weight_type).block_elems == 0);
    if (job.w_tiled && active_path() != CpuPath::Avx512) tiled_off_avx512();
    k.matmul_rows(job, r0, r1);
}

float vec_dot(DType weight_type, const void* weight_row, const void* act_row, int64_t n) {
    float out = 0.0f;
    MatmulJob job;
    job.w = static_cast<const uint8_t*>(weight_row);
    job.w_stride = row_bytes(weight_type, n);
    job.n_rows = 1;
    job.n_cols = n;
    job.acts = static_cast<const uint8_t*>(act_row);
    job.a_stride = act_row_bytes(weight_type, n);
    job.n_tok = 1;
    job.y = &out;
    job.ldy = 1;
    matmul_rows(weight_type, job, 0, 1);
    return out;
}

void dequantize_row(DType type, const void* src, float* dst, int64_t n) {
    const QuantKernels& k = kernels(type);
    if (!k.dequantize) no_kernel(type, "dequantize");
    STRATA_ASSERT(n % traits(type).block_elems == 0);
    k.dequantize(src, dst, n);
}

}  // namespace strata::cpu
