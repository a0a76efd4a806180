#pragma once
// Private to planner/*.cpp (it includes nlohmann/json): typed field access that turns a
// missing or mistyped field into one UsageError naming the document and the field path.
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/core/error.h"

namespace strata::planner::json_util {

using nlohmann::json;

inline json parse(std::string_view text, std::string_view what) {
    try {
        return json::parse(text.begin(), text.end());
    } catch (const json::exception& e) {
        throw UsageError(fmt::format("{} is not valid JSON: {}", what, e.what()));
    }
}

// Reads j[key] as T; `path` names the object in messages ("plan.policy").
template <class T>
T get(const json& j, std::string_view path, const char* key) {
    if (!j.is_object() || !j.contains(key))
        throw UsageError(fmt::format("{}: missing field '{}'", path, key));
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
