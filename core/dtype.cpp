#include "core/dtype.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <string>

#include "core/error.h"

namespace strata {
namespace {

constexpr std::array kTypes = {
    DTypeTraits{DType::F32, "F32", 1, 4, true},
    DTypeTraits{DType::F16, "F16", 1, 2, true},
    DTypeTraits{DType::Q4_0, "Q4_0", 32, 18, true},
    DTypeTraits{DType::Q4_1, "Q4_1", 32, 20, true},
    DTypeTraits{DType::Q5_0, "Q5_0", 32, 22, true},
    DTypeTraits{DType::Q5_1, "Q5_1", 32, 24, true},
    DTypeTraits{DType::Q8_0, "Q8_0", 32, 34, true},
    DTypeTraits{DType::Q8_1, "Q8_1", 32, 36, false},
    DTypeTraits{DType::Q2_K, "Q2_K", 256, 84, true},
    DTypeTraits{DType::Q3_K, "Q3_K", 256, 110, true},
    DTypeTraits{DType::Q4_K, "Q4_K", 256, 144, true},
    DTypeTraits{DType::Q5_K, "Q5_K", 256, 176, true},
    DTypeTraits{DType::Q6_K, "Q6_K", 256, 210, true},
    DTypeTraits{DType::Q8_K, "Q8_K", 256, 292, true},
    DTypeTraits{DType::IQ4_NL, "IQ4_NL", 32, 18, true},
    DTypeTraits{DType::IQ4_XS, "IQ4_XS", 256, 136, true},
    DTypeTraits{DType::I8, "I8", 1, 1, false},
    DTypeTraits{DType::I16, "I16", 1, 2, false},
    DTypeTraits{DType::I32, "I32", 1, 4, false},
    DTypeTraits{DType::I64, "I64", 1, 8, false},
    DTypeTraits{DType::F64, "F64", 1, 8, false},
    DTypeTraits{DType::BF16, "BF16", 1, 2, true},
    DTypeTraits{DType::MXFP4, "MXFP4", 32, 17, true},  // e8m0 scale + 16 bytes of e2m1 pairs
};

}  // namespace

std::optional<DTypeTraits> dtype_traits(uint32_t id) {
    for (const auto& t : kTypes)
        if (static_cast<uint32_t>(t.type) == id) return t;
    return std::nullopt;
}

const DTypeTraits& traits(DType t) {
    for (const auto& tr : kTypes)
        if (tr.type == t) return tr;
    STRATA_ASSERT(false && "DType missing from the traits table");
}

std::string_view dtype_name(DType t) { return traits(t).name; }

std::optional<DType> dtype_from_name(std::string_view name) {
    std::string upper(name);
    std::transform(upper.begin(), upper.end(), upper.begin(), [](unsigned char c) { return std::toupper(c); });
    for (const auto& t : kTypes)
        if (t.name == upper) return t.type;
    return std::nullopt;
}

size_t row_bytes(DType t, int64_t n) {
    const auto& tr = traits(t);
    STRATA_ASSERT(n % tr.block_elems == 0);
    return static_cast<size_t>(n / tr.block_elems) * tr.block_bytes;
}

std::string_view computable_dtype_list() {
    static const std::string list = [] {
        std::string s;
        for (const auto& t : kTypes)
            if (t.computable) s += (s.empty() ? "" : ", ") + std::string(t.name);
        return s;
    }();
    return list;
}

}  // namespace strata
