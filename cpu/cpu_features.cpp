#include "cpu/cpu_features.h"

#include <atomic>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "core/log.h"

namespace strata::cpu {
namespace {

CpuFeatures detect() {
    CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
    // __builtin_cpu_supports checks both cpuid and that the OS saves the wider registers.
    __builtin_cpu_init();
    f.avx2 = __builtin_cpu_supports("avx2");
    f.fma = __builtin_cpu_supports("fma");
    f.f16c = __builtin_cpu_supports("f16c");
    f.avx512f = __builtin_cpu_supports("avx512f");
    f.avx512bw = __builtin_cpu_supports("avx512bw");
    f.avx512vl = __builtin_cpu_supports("avx512vl");
    f.avx512vnni = __builtin_cpu_supports("avx512vnni");
    f.avx512bf16 = __builtin_cpu_supports("avx512bf16");
#endif
    return f;
}

// -1: not chosen yet; otherwise a CpuPath value.
std::atomic<int> g_active{-1};

}  // namespace

const CpuFeatures& cpu_features() {
    static const CpuFeatures features = detect();
    return features;
}

bool path_supported(CpuPath path) {
    const CpuFeatures& f = cpu_features();
    switch (path) {
        case CpuPath::Scalar: return true;
        case CpuPath::Avx2: return f.avx2 && f.fma && f.f16c;
        case CpuPath::Avx512:
            return path_supported(CpuPath::Avx2) && f.avx512f && f.avx512bw && f.avx512vl && f.avx512vnni;
    }
    return false;
}

CpuPath best_path() {
    if (path_supported(CpuPath::Avx512)) return CpuPath::Avx512;
    if (path_supported(CpuPath::Avx2)) return CpuPath::Avx2;
    return CpuPath::Scalar;
}

std::string_view path_name(CpuPath path) {
    switch (path) {
        case CpuPath::Scalar: return "scalar";
        case CpuPath::Avx2: return "avx2";
        case CpuPath::Avx512: return "avx512";
    }
    return "?";
}

std::optional<CpuPath> parse_cpu_path(std::string_view name) {
    for (CpuPath p : {CpuPath::Scalar, CpuPath::Avx2, CpuPath::Avx512})
        if (name == path_name(p)) return p;
    return std::nullopt;
}

CpuPath path_from_env() {
    const char* env = std::getenv("STRATA_CPU");
    if (env == nullptr || *env == '\0') return best_path();
    auto path = parse_cpu_path(env);
    if (!path)
        throw UsageError("STRATA_CPU='" + std::string(env) + "' is not a kernel set",
                         "use scalar, avx2 or avx512, or unset it");
    if (!path_supported(*path))
        throw UsageError("STRATA_CPU=" + std::string(env) + " but this CPU cannot run those kernels",
                         "use STRATA_CPU=" + std::string(path_name(best_path())) + " or unset it");
    return *path;
}

CpuPath active_path() {
    int p = g_active.load(std::memory_order_relaxed);
    if (p < 0) {
        const CpuPath chosen = path_from_env();
        int expected = -1;
        if (g_active.compare_exchange_strong(expected, static_cast<int>(chosen)))
            STRATA_LOG_INFO("cpu: {} kernels (best this CPU runs: {})", path_name(chosen), path_name(best_path()));
        p = g_active.load(std::memory_order_relaxed);
    }
    return static_cast<CpuPath>(p);
}

void set_active_path(CpuPath path) {
    if (!path_supported(path))
        throw UsageError("this CPU cannot run the " + std::string(path_name(path)) + " kernels",
                         "best available: " + std::string(path_name(best_path())));
    g_active.store(static_cast<int>(path), std::memory_order_relaxed);
}

}  // namespace strata::cpu
