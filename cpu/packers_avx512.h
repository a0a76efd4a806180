#pragma once
// The packer (pack_avx512.h, pack_low_bit_avx512.h) of each block-quantized weight type, for
// the VNNI (gemm_avx512.cpp) and AMX (gemm_amx.cpp) kernels. Include only from files built with
// the AVX-512 flags.
#include "core/dtype.h"
#include "cpu/pack_avx512.h"
#include "cpu/pack_low_bit_avx512.h"

namespace strata::cpu::pack {

// f.template operator()<P, type>() for the packer P of a block-quantized `type`; R{} for a type
// without one.
template <class R, class F>
R with_packer(DType type, F&& f) {
    switch (type) {
        case DType::Q4_0: return f.template operator()<PackQ4<BlockQ4_0, 8, false>, DType::Q4_0>();
        case DType::Q4_1: return f.template operator()<PackQ4<BlockQ4_1, 0, true>, DType::Q4_1>();
        case DType::Q8_0: return f.template operator()<PackQ8_0, DType::Q8_0>();
        case DType::Q4_K: return f.template operator()<PackQ45K<false>, DType::Q4_K>();
        case DType::Q5_K: return f.template operator()<PackQ45K<true>, DType::Q5_K>();
        case DType::Q5_0: return f.template operator()<PackQ5<BlockQ5_0, 16, false>, DType::Q5_0>();
        case DType::Q5_1: return f.template operator()<PackQ5<BlockQ5_1, 0, true>, DType::Q5_1>();
        case DType::Q6_K: return f.template operator()<PackQ6K, DType::Q6_K>();
        case DType::Q8_K: return f.template operator()<PackQ8K, DType::Q8_K>();
        case DType::Q2_K: return f.template operator()<PackQ2K, DType::Q2_K>();
        case DType::Q3_K: return f.template operator()<PackQ3K, DType::Q3_K>();
        case DType::IQ4_NL: return f.template operator()<PackQ4<BlockIQ4_NL, 128, false, kIq4Values>, DType::IQ4_NL>();
        case DType::IQ4_XS: return f.template operator()<PackIQ4XS, DType::IQ4_XS>();
        case DType::MXFP4: return f.template operator()<PackQ4<BlockMXFP4, 128, false, kMxfp4Values>, DType::MXFP4>();
        default: return R{};
    }
}

}  // namespace strata::cpu::pack
