#pragma once
// Small x86 helpers shared by the kernel files built for different instruction sets
// (quant_avx2.cpp with -mavx2 -mf16c, quant_avx512.cpp with -mavx512*). They have internal
// linkage: an inline function with external linkage compiled under two -m flag sets would be
// merged by the linker into one copy, and the AVX-512 one could then run on an AVX2-only CPU.
#include <immintrin.h>

#include "cpu/quant_ref.h"

namespace strata::cpu {
namespace {  // NOLINT(google-build-namespaces): internal linkage on purpose, see above

// IEEE half -> float with F16C.
inline float h2f(f16_bits h) { return _cvtsh_ss(h); }

// Weights stream from DRAM: a software prefetch `kAhead` bytes ahead of `p` (+ offset) lets one
// core use its bandwidth. Prefetches never fault, so running past the end is harmless.
template <int kAhead>
inline void prefetch_ahead(const void* p, int offset = 0) {
    _mm_prefetch(static_cast<const char*>(p) + kAhead + offset, _MM_HINT_T0);
}

}  // namespace
}  // namespace strata::cpu
