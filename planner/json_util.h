#pragma once
// Private to planner/*.cpp (it includes nlohmann/json): typed field access that turns a
// missing or mistyped field into one UsageError naming the document and the field path.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace strata::planner::json_util {

using nlohmann::json;

inline json parse(std::string_view text, std::string_view what) {
    try {
        return json::parse(text.begin(), text.end());
    } catch (const json::exception& e) {
        throw UsageError(fmt::format("{} is not valid JSON: {}", what, e.what()));
    }
}

// Whether a JSON number converts to the integer type T exactly. nlohmann converts with a
// plain cast, which is undefined behaviour for a value out of range (1e12 into int32_t).
// Values that are not numbers are left to get<T>(), which rejects them.
template <class T>
bool fits_integer(const json& v) {
    if (v.is_number_unsigned()) return std::in_range<T>(v.get<uint64_t>());
    if (v.is_number_integer()) return std::in_range<T>(v.get<int64_t>());
    if (!v.is_number_float()) return true;
    const double x = v.get<double>();
    return x == std::trunc(x) && x >= static_cast<double>(std::numeric_limits<T>::min()) &&
           x < std::ldexp(1.0, std::numeric_limits<T>::digits);  // NaN fails every comparison
}

// Reads j[key] as T; `path` names the object in messages ("plan.policy").
template <class T>
T get(const json& j, std::string_view path, const char* key) {
    if (!j.is_object() || !j.contains(key))
        throw UsageError(fmt::format("{}: missing field '{}'", path, key));
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        if (!fits_integer<T>(j.at(key)))
            throw UsageError(fmt::format("{}: field '{}' is {}, not a whole number from {} to {}", path, key,
                                         j.at(key).dump(), std::numeric_limits<T>::min(), std::numeric_limits<T>::max()));
    }
    try {
        return j.at(key).get<T>();
    } catch (const json::exception&) {
        throw UsageError(fmt::format("{}: field '{}' has the wrong type ({})", path, key, j.at(key).dump()));
    }
}

template <class T>
T get_or(const json& j, std::string_view path, const char* key, T fallback) {
    if (!j.is_object() || !j.contains(key) || j.at(key).is_null()) return fallback;
    return get<T>(j, path, key);
}

inline const json& object(const json& j, std::string_view path, const char* key) {
    if (!j.is_object() || !j.contains(key) || !j.at(key).is_object())
        throw UsageError(fmt::format("{}: missing object '{}'", path, key));
    return j.at(key);
}

}  // namespace strata::planner::json_util
