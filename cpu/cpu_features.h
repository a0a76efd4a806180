#pragma once
// Which SIMD kernels this CPU can run, detected once at run time, and which set the quant
// and matmul kernels use. The build may target an older CPU than the one it runs on (and the
// reverse), so kernels are picked here rather than by #ifdef.
#include <optional>
#include <string_view>

namespace strata::cpu {

struct CpuFeatures {
    bool avx2 = false, fma = false, f16c = false;
    bool avx512f = false, avx512bw = false, avx512vl = false;
    bool avx512vnni = false, avx512bf16 = false;
};

// Kernel sets, slowest to fastest. Scalar always works.
//   Avx2:   AVX2 + FMA + F16C.
//   Avx512: AVX-512 F/BW/VL + VNNI (+ F16C/FMA); BF16 dot products only where avx512bf16 is set.
enum class CpuPath { Scalar = 0, Avx2 = 1, Avx512 = 2 };

// Detected once (cpuid + OS xsave state via __builtin_cpu_supports).
const CpuFeatures& cpu_features();
bool path_supported(CpuPath path);
CpuPath best_path();

std::string_view path_name(CpuPath path);  // "scalar", "avx2", "avx512"
std::optional<CpuPath> parse_cpu_path(std::string_view name);

// The path chosen by the STRATA_CPU environment variable (scalar|avx2|avx512), or best_path()
// when it is unset or empty. Throws UsageError for an unknown name or a path this CPU lacks.
CpuPath path_from_env();

// The path the kernels use now: path_from_env() on first use, then whatever set_active_path
// chose. Tests force each path in turn with set_active_path.
CpuPath active_path();
// Throws UsageError when the CPU cannot run `path`.
void set_active_path(CpuPath path);

}  // namespace strata::cpu
