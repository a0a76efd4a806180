#pragma once
// A GGUF metadata value: a scalar, a string or a (possibly nested) array.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace strata::models {

enum class GgufType : uint32_t {
    U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7,
    STRING = 8, ARRAY = 9, U64 = 10, I64 = 11, F64 = 12,
};
std::string_view gguf_type_name(GgufType t);

struct GgufValue;
struct GgufArray {
    GgufType elem_type = GgufType::U8;
    std::vector<GgufValue> items;
};

struct GgufValue {
    GgufType type = GgufType::U8;
    std::variant<uint64_t, int64_t, double, bool, std::string, std::shared_ptr<GgufArray>> v;

    bool is_integer() const;
    bool is_number() const { return is_integer() || type == GgufType::F32 || type == GgufType::F64; }
    // Conversions check the type; they throw FormatError naming `key` on a mismatch.
    int64_t as_int(std::string_view key) const;
    double as_float(std::string_view key) const;
    bool as_bool(std::string_view key) const;
    const std::string& as_string(std::string_view key) const;
    const GgufArray& as_array(std::string_view key) const;
    // Short human-readable rendering (arrays abbreviated), for `strata inspect`.
    std::string to_display(size_t max_items = 8) const;
};

}  // namespace strata::models
