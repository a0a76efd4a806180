// Typed access to GGUF metadata keys.
#include <fmt/format.h>

#include "core/error.h"
#include "models/gguf_file.h"

namespace strata::models {

namespace {
[[noreturn]] void missing(std::string_view key) {
    throw FormatError(fmt::format("GGUF metadata key '{}' is missing", key),
                      "the model file is incomplete or was written by an incompatible converter");
}

template <class T, class F>
std::vector<T> map_array(const GgufFile& f, std::string_view key, F&& conv) {
    const auto* v = f.find(key);
    if (!v) missing(key);
    const auto& arr = v->as_array(key);
    std::vector<T> out;
    out.reserve(arr.items.size());
    for (const auto& item : arr.items) out.push_back(conv(item));
    return out;
}
}  // namespace

const GgufValue* GgufFile::find(std::string_view key) const {
    auto it = kv_.find(key);
    return it == kv_.end() ? nullptr : &it->second;
}

int64_t GgufFile::get_int(std::string_view key) const {
    if (auto v = get_int_opt(key)) return *v;
    missing(key);
}

std::optional<int64_t> GgufFile::get_int_opt(std::string_view key) const {
    const auto* v = find(key);
    return v ? std::optional(v->as_int(key)) : std::nullopt;
}

double GgufFile::get_float(std::string_view key) const {
    if (auto v = get_float_opt(key)) return *v;
    missing(key);
}

std::optional<double> GgufFile::get_float_opt(std::string_view key) const {
    const auto* v = find(key);
    return v ? std::optional(v->as_float(key)) : std::nullopt;
}

std::optional<bool> GgufFile::get_bool_opt(std::string_view key) const {
    const auto* v = find(key);
    return v ? std::optional(v->as_bool(key)) : std::nullopt;
}

std::string GgufFile::get_string(std::string_view key) const {
    if (auto v = get_string_opt(key)) return *v;
    missing(key);
}

std::optional<std::string> GgufFile::get_string_opt(std::string_view key) const {
    const auto* v = find(key);
    return v ? std::optional(v->as_string(key)) : std::nullopt;
}

std::vector<std::string> GgufFile::get_string_array(std::string_view key) const {
    return map_array<std::string>(*this, key, [&](const GgufValue& x) { return x.as_string(key); });
}

std::vector<float> GgufFile::get_float_array(std::string_view key) const {
    return map_array<float>(*this, key, [&](const GgufValue& x) { return static_cast<float>(x.as_float(key)); });
}

std::vector<int64_t> GgufFile::get_int_array(std::string_view key) const {
    return map_array<int64_t>(*this, key, [&](const GgufValue& x) { return x.as_int(key); });
}

}  // namespace strata::models
