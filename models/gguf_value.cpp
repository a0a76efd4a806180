#include "models/gguf_value.h"

#include <fmt/format.h>

#include "core/error.h"

namespace strata::models {

std::string_view gguf_type_name(GgufType t) {
    switch (t) {
        case GgufType::U8: return "u8";
        case GgufType::I8: return "i8";
        case GgufType::U16: return "u16";
        case GgufType::I16: return "i16";
        case GgufType::U32: return "u32";
        case GgufType::I32: return "i32";
        case GgufType::F32: return "f32";
        case GgufType::BOOL: return "bool";
        case GgufType::STRING: return "string";
        case GgufType::ARRAY: return "array";
        case GgufType::U64: return "u64";
        case GgufType::I64: return "i64";
        case GgufType::F64: return "f64";
    }
    return "unknown";
}

bool GgufValue::is_integer() const {
    return std::holds_alternative<uint64_t>(v) || std::holds_alternative<int64_t>(v);
}

namespace {
[[noreturn]] void mismatch(std::string_view key, std::string_view want, GgufType got) {
    throw FormatError(fmt::format("GGUF key '{}' has type {}, expected {}", key, gguf_type_name(got), want),
                      "the file may be corrupt or written by an incompatible converter");
}
}  // namespace

int64_t GgufValue::as_int(std::string_view key) const {
    if (auto* u = std::get_if<uint64_t>(&v)) {
        if (*u > static_cast<uint64_t>(INT64_MAX))
            throw FormatError(fmt::format("GGUF key '{}' value {} is out of range", key, *u));
        return static_cast<int64_t>(*u);
    }
    if (auto* i = std::get_if<int64_t>(&v)) return *i;
    mismatch(key, "an integer", type);
}

double GgufValue::as_float(std::string_view key) const {
    if (auto* d = std::get_if<double>(&v)) return *d;
    if (is_integer()) return static_cast<double>(as_int(key));
    mismatch(key, "a number", type);
}

bool GgufValue::as_bool(std::string_view key) const {
    if (auto* b = std::get_if<bool>(&v)) return *b;
    mismatch(key, "bool", type);
}

const std::string& GgufValue::as_string(std::string_view key) const {
    if (auto* s = std::get_if<std::string>(&v)) return *s;
    mismatch(key, "string", type);
}

const GgufArray& GgufValue::as_array(std::string_view key) const {
    if (auto* a = std::get_if<std::shared_ptr<GgufArray>>(&v)) return **a;
    mismatch(key, "array", type);
}

std::string GgufValue::to_display(size_t max_items) const {
    return std::visit(
        [&](const auto& x) -> std::string {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, std::string>) {
                std::string s = x.size() > 120 ? x.substr(0, 117) + "..." : x;
                for (auto& c : s)
                    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
                return "\"" + s + "\"";
            } else if constexpr (std::is_same_v<T, std::shared_ptr<GgufArray>>) {
                std::string s = fmt::format("[{} x {}: ", x->items.size(), gguf_type_name(x->elem_type));
                for (size_t i = 0; i < x->items.size() && i < max_items; ++i)
                    s += (i ? ", " : "") + x->items[i].to_display(max_items);
                return s + (x->items.size() > max_items ? ", ...]" : "]");
            } else if constexpr (std::is_same_v<T, bool>) {
                return x ? "true" : "false";
            } else if constexpr (std::is_same_v<T, double>) {
                // Shortest text that reads back to the stored value (f32 keys print as 1e-05).
                return type == GgufType::F32 ? fmt::format("{}", static_cast<float>(x)) : fmt::format("{}", x);
            } else {
                return fmt::format("{}", x);
            }
        },
        v);
}

}  // namespace strata::models
