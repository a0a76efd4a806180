#pragma once
// Reading request bodies: JSON parsed within limits, and typed fields that are absent, null
// (OpenAI's "not given") or a 400 naming the field. Objects keep their keys' order, so that
// tools and schemas reach the model as the client wrote them. Shared by every endpoint.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace strata::openai {

using Json = nlohmann::ordered_json;

// Deeper JSON is refused: serialising, comparing or destroying a value recurses once per
// level, and a 1 MiB body can nest half a million of them.
inline constexpr int kMaxJsonDepth = 64;

// Parses `text` (a request body, a batch line), which `what` names in the error, without
// ever recursing into it. Throws ApiError 400 with `code` for malformed JSON (including
// ill-formed UTF-8, which RFC 8259 forbids) and for nesting deeper than kMaxJsonDepth.
Json parse_json_limited(std::string_view text, const std::string& what, const std::string& code);

// A short rendering of a value for error messages: a huge field must not make a huge error.
std::string shown(const Json& v);
// The field, or nullptr when it is absent or null.
const Json* field(const Json& body, const char* key);
// The field's value within lo..hi, or `fallback` when absent; else a 400 naming it.
double number_in(const Json& body, const char* key, double lo, double hi, double fallback);
std::optional<int64_t> integer_at_least(const Json& body, const char* key, int64_t lo);
// An integer within lo..hi, or `fallback`.
int64_t integer_in(const Json& body, const char* key, int64_t lo, int64_t hi, int64_t fallback);
bool boolean(const Json& body, const char* key);
// A string field, or `fallback`.
std::string string_field(const Json& body, const char* key, const std::string& fallback);
// `v`, a string, at `where` (its path in the body); else a 400 naming it.
std::string string_at(const Json& v, const std::string& where);
// Field `key` of the value at `where`; a 400 naming where.key when it is absent or null (or the
// value is no object).
const Json& required_field(const Json& object, const char* key, const std::string& where);
// JSON text for the wire: invalid UTF-8 from a model is replaced, never an exception.
std::string dump(const Json& j);

}  // namespace strata::openai
