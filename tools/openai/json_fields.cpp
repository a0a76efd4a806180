#include "tools/openai/json_fields.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tools/openai/api_error.h"

namespace strata::openai {

std::string shown(const Json& v) {
    std::string s = v.dump(-1, ' ', false, Json::error_handler_t::replace);
    if (s.size() > 40) s = s.substr(0, 37) + "...";
    return s;
}

const Json* field(const Json& body, const char* key) {
    auto it = body.find(key);
    return it == body.end() || it->is_null() ? nullptr : &*it;
}

std::string string_at(const Json& v, const std::string& where) {
    if (!v.is_string()) throw invalid_request(fmt::format("'{}' must be a string, not {}", where, shown(v)), where);
    return v.get<std::string>();
}

const Json& required_field(const Json& object, const char* key, const std::string& where) {
    const Json* v = object.is_object() ? field(object, key) : nullptr;
    if (!v) throw invalid_request(fmt::format("'{}.{}' is required", where, key), fmt::format("{}.{}", where, key));
    return *v;
}

double number_in(const Json& body, const char* key, double lo, double hi, double fallback) {
    const Json* v = field(body, key);
    if (!v) return fallback;
    if (!v->is_number() || v->get<double>() < lo || v->get<double>() > hi)
        throw invalid_request(fmt::format("'{}' must be a number from {} to {}, not {}", key, lo, hi, shown(*v)), key);
    return v->get<double>();
}

std::optional<int64_t> integer_at_least(const Json& body, const char* key, int64_t lo) {
    const Json* v = field(body, key);
    if (!v) return std::nullopt;
    if (!v->is_number_integer() || v->get<int64_t>() < lo)
        throw invalid_request(fmt::format("'{}' must be an integer of at least {}, not {}", key, lo, shown(*v)), key);
    return v->get<int64_t>();
}

int64_t integer_in(const Json& body, const char* key, int64_t lo, int64_t hi, int64_t fallback) {
    const Json* v = field(body, key);
    if (!v) return fallback;
    if (!v->is_number_integer() || v->get<int64_t>() < lo || v->get<int64_t>() > hi)
        throw invalid_request(fmt::format("'{}' must be an integer from {} to {}, not {}", key, lo, hi, shown(*v)), key);
    return v->get<int64_t>();
}

bool boolean(const Json& body, const char* key) {
    const Json* v = field(body, key);
    if (!v) return false;
    if (!v->is_boolean()) throw invalid_request(fmt::format("'{}' must be true or false, not {}", key, shown(*v)), key);
    return v->get<bool>();
}

std::string string_field(const Json& body, const char* key, const std::string& fallback) {
    const Json* v = field(body, key);
    if (!v) return fallback;
    if (!v->is_string()) throw invalid_request(fmt::format("'{}' must be a string, not {}", key, shown(*v)), key);
    return v->get<std::string>();
}

std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

Json parse_json_limited(std::string_view text, const std::string& what, const std::string& code) {
    // The parser itself does not recurse. Its callback sees each array and object open with
    // the number of containers around it; one nested too deep is dropped (and the text
    // refused below), so no deep value is ever built for anything to recurse into.
    bool too_deep = false;
    const Json::parser_callback_t limit = [&too_deep](int depth, Json::parse_event_t event, Json&) {
        const bool opens = event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start;
        if (!opens || depth < kMaxJsonDepth) return true;
        too_deep = true;
        return false;
    };
    // A raw NUL is never valid JSON, but nlohmann's lexer takes it for the end of the input
    // and would accept whatever came before.
    if (const size_t nul = text.find('\0'); nul != std::string_view::npos)
        throw invalid_request(fmt::format("{} is not valid JSON (byte {}): a NUL byte", what, nul), {}, code);
    Json j;
    try {
        j = Json::parse(text, limit);
    } catch (const Json::parse_error& e) {
        // "... parse error at line 1, column 9: syntax error while parsing value - invalid
        // literal; last read: '...'": the reason, without the echo of the offending bytes.
        std::string reason = e.what();
        if (const size_t dash = reason.find(" - "); dash != std::string::npos) reason = reason.substr(dash + 3);
        if (const size_t echo = reason.find("; last read"); echo != std::string::npos) reason.resize(echo);
        throw invalid_request(fmt::format("{} is not valid JSON (byte {}): {}", what, e.byte, reason), {}, code);
    } catch (const Json::exception& e) {  // out_of_range: a number past the largest double
        std::string reason = e.what();
        if (const size_t tag = reason.find("] "); tag != std::string::npos) reason = reason.substr(tag + 2);
        throw invalid_request(fmt::format("{} is not valid JSON: {}", what, reason), {}, code);
    }
    if (too_deep)
        throw invalid_request(fmt::format("{} nests arrays or objects more than {} levels deep", what, kMaxJsonDepth), {}, code);
    return j;
}

}  // namespace strata::openai
