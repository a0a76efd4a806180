#include <catch2/catch.hpp>

#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "runtime/grammar/gbnf.h"
#include "runtime/grammar/grammar_matcher.h"
#include "runtime/grammar/json_schema_grammar.h"
#include "tests/support/grammar_text.h"

using namespace strata;
using namespace strata::runtime;
using nlohmann::ordered_json;
using test::grammar_accepts;

namespace {

size_t code_points(const std::string& s) {
    size_t n = 0;
    for (unsigned char c : s) n += (c & 0xc0) != 0x80;
    return n;
}

// A validator written from the JSON Schema text for the keywords the compiler supports: the
// reference the generated sentences are checked against.
bool valid(const ordered_json& v, const ordered_json& s, const ordered_json& root) {
    if (s.is_boolean()) return s.get<bool>();
    if (s.contains("$ref")) {
        const std::string ref = s["$ref"];
        return valid(v, root["$defs"][ref.substr(std::string("#/$defs/").size())], root);
    }
    if (s.contains("const") && v != s["const"]) return false;
    if (s.contains("enum") && std::find(s["enum"].begin(), s["enum"].end(), v) == s["enum"].end()) return false;
    if (s.contains("anyOf") && std::none_of(s["anyOf"].begin(), s["anyOf"].end(), [&](const auto& sub) { return valid(v, sub, root); }))
        return false;
    if (s.contains("oneOf") && std::count_if(s["oneOf"].begin(), s["oneOf"].end(), [&](const auto& sub) { return valid(v, sub, root); }) != 1)
        return false;
    if (s.contains("type")) {
        const auto types = s["type"].is_array() ? s["type"] : ordered_json::array({s["type"]});
        const bool ok = std::any_of(types.begin(), types.end(), [&](const ordered_json& t) {
            return (t == "object" && v.is_object()) || (t == "array" && v.is_array()) || (t == "string" && v.is_string()) ||
                   (t == "integer" && (v.is_number_integer() || (v.is_number_float() && v.get<double>() == std::floor(v.get<double>())))) ||
                   (t == "number" && v.is_number()) || (t == "boolean" && v.is_boolean()) || (t == "null" && v.is_null());
        });
        if (!ok) return false;
    }
    if (v.is_number()) {
        const double x = v.get<double>();
        if (s.contains("minimum") && x < s["minimum"].get<double>()) return false;
        if (s.contains("maximum") && x > s["maximum"].get<double>()) return false;
        if (s.contains("exclusiveMinimum") && x <= s["exclusiveMinimum"].get<double>()) return false;
        if (s.contains("exclusiveMaximum") && x >= s["exclusiveMaximum"].get<double>()) return false;
    }
    if (v.is_string()) {
        const size_t n = code_points(v.get<std::string>());
        if (s.contains("minLength") && n < s["minLength"].get<size_t>()) return false;
        if (s.contains("maxLength") && n > s["maxLength"].get<size_t>()) return false;
    }
    if (v.is_array()) {
        if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return false;
        if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return false;
        for (size_t i = 0; i < v.size(); ++i) {
            if (s.contains("prefixItems") && i < s["prefixItems"].size()) {
                if (!valid(v[i], s["prefixItems"][i], root)) return false;
            } else if (s.contains("items") && !valid(v[i], s["items"], root)) {
                return false;
            }
        }
    }
    if (v.is_object()) {
        for (const auto& r : s.value("required", ordered_json::array()))
            if (!v.contains(r.get<std::string>())) return false;
        for (const auto& [key, val] : v.items()) {
            if (s.contains("properties") && s["properties"].contains(key)) {
                if (!valid(val, s["properties"][key], root)) return false;
            } else if (s.contains("additionalProperties") && !valid(val, s["additionalProperties"], root)) {
                return false;
            }
        }
    }
    return true;
}

// A random text of the grammar: random bytes among those it allows, ending once it may.
std::string random_sentence(const std::shared_ptr<const Grammar>& g, std::mt19937& rng) {
    GrammarMatcher m(g);
    std::string out;
    std::vector<std::string> alphabet;
    for (int b = 0x09; b < 0x7f; ++b) alphabet.emplace_back(1, static_cast<char>(b));
    for (const char* u : {"é", "中", "\n"}) alphabet.emplace_back(u);
    while (out.size() < 5000) {
        if (m.complete() && (rng() % 3 == 0 || out.size() > 200)) return out;
        std::vector<std::string> options, closing;
        for (const auto& a : alphabet)
            if (m.allows(a)) (a == "\"" || a == "]" || a == "}" ? closing : options).push_back(a);
        // Long enough: close what is open.
        if (out.size() > 200 && !closing.empty()) options = closing;
        options.insert(options.end(), closing.begin(), closing.end());
        if (options.empty() && m.complete()) return out;  // nothing may follow
        INFO("so far: " << out);
        REQUIRE_FALSE(options.empty());
        const std::string& pick = options[std::uniform_int_distribution<size_t>(0, options.size() - 1)(rng)];
        REQUIRE(m.accept(pick));
        out += pick;
    }
    FAIL("no end in 5000 bytes: " << out);
    return out;
}

}  // namespace

TEST_CASE("every text a schema's grammar allows is JSON that validates against the schema", "[unit][grammar]") {
    const std::vector<ordered_json> schemas = {
        ordered_json::parse(R"({"type": "object", "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 6},
            "age": {"type": "integer"}, "email": {"type": ["string", "null"]}}, "required": ["name", "age"]})"),
        ordered_json::parse(R"({"type": "object", "properties": {"a": {"type": "boolean"}, "b": {"type": "number"},
            "c": {"enum": ["x", 1, null, [2]]}}, "additionalProperties": {"type": "integer"}})"),
        ordered_json::parse(R"({"type": "array", "items": {"anyOf": [{"type": "string"}, {"const": {"k": [true]}}]},
            "minItems": 2, "maxItems": 4})"),
        ordered_json::parse(R"({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string", "maxLength": 0}]})"),
        ordered_json::parse(R"({"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
            "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}}, "required": ["v"]}},
            "$ref": "#/$defs/node"})"),
        ordered_json::parse(R"({"oneOf": [{"type": "null"}, {"type": "object", "properties": {"x": {}}, "additionalProperties": false}],
            "description": "annotations are ignored", "title": "t"})"),
        ordered_json::parse(R"({"type": "object"})"),
        ordered_json::parse(R"({"type": "array", "items": {"anyOf": [{"type": "integer", "minimum": -3, "exclusiveMaximum": 120},
            {"type": "integer", "exclusiveMinimum": 1000}, {"type": "number", "minimum": 0}]}})"),
        ordered_json::parse(R"({})"),
    };
    std::mt19937 rng(11);
    for (const auto& schema : schemas) {
        const std::string gbnf = json_schema_to_gbnf(schema);
        INFO(schema.dump() << "\n" << gbnf);
        const auto g = std::make_shared<const Grammar>(parse_gbnf(gbnf));
        for (int i = 0; i < 40; ++i) {
            const std::string text = random_sentence(g, rng);
            INFO(text);
            const ordered_json value = ordered_json::parse(text);  // throws if it is not JSON
            CHECK(valid(value, schema, schema));
        }
    }
}

TEST_CASE("a schema's grammar refuses what the schema forbids", "[unit][grammar]") {
    const std::string g = json_schema_to_gbnf(ordered_json::parse(
        R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string", "maxLength": 2}}, "required": ["a"]})"));
    CHECK(grammar_accepts(g, R"({"a": 1})"));
    CHECK(grammar_accepts(g, R"({ "a":-20 , "b": "\u00e9\n" })"));
    CHECK_FALSE(grammar_accepts(g, R"({"a": "1"})"));
    CHECK_FALSE(grammar_accepts(g, R"({})"));
    CHECK_FALSE(grammar_accepts(g, R"({"b": "x", "a": 1})"));  // properties in the schema's order
    CHECK_FALSE(grammar_accepts(g, R"({"a": 1, "b": "xyz"})"));
    CHECK_FALSE(grammar_accepts(g, R"({"a": 1, "c": 2})"));
    CHECK_FALSE(grammar_accepts(g, R"({"a": 01})"));
    CHECK_FALSE(grammar_accepts(g, R"({"a": 1, "b": "\ud800"})"));  // a lone surrogate
    // Additional properties never reuse a listed name (whose value has its own schema).
    const std::string extra = json_schema_to_gbnf(ordered_json::parse(
        R"({"type": "object", "properties": {"ab": {"type": "string"}}, "additionalProperties": {"type": "integer"}})"));
    CHECK(grammar_accepts(extra, R"({"ab": "x", "a": 1, "abc": 2, "b": 3})"));
    CHECK_FALSE(grammar_accepts(extra, R"({"ab": 5})"));
    CHECK_FALSE(grammar_accepts(extra, R"({"ab": "x", "ab": 1})"));
}

TEST_CASE("string formats: dates, times and UUIDs are held as RFC 3339 and RFC 4122 write them", "[unit][grammar]") {
    const auto format = [](const char* f) {
        return json_schema_to_gbnf(ordered_json::parse(fmt::format(R"({{"type": "string", "format": "{}"}})", f)));
    };
    const std::string date = format("date"), time = format("time"), date_time = format("date-time"), uuid = format("uuid");
    for (const char* ok : {R"("2024-02-29")", R"("0001-12-31")", R"("2023-04-30")", R"("2023-08-31")"}) CHECK(grammar_accepts(date, ok));
    for (const char* bad : {R"("2024-13-01")", R"("2024-00-10")", R"("2024-1-10")", R"("2024-01-32")", R"("2023-02-30")",
                            R"("2023-04-31")", R"("2023-11-31")", R"("normal")", R"("")"})
        CHECK_FALSE(grammar_accepts(date, bad));
    for (const char* ok : {R"("23:59:59Z")", R"("07:05:00.123456+05:30")", R"("00:00:00-11:00")"}) CHECK(grammar_accepts(time, ok));
    for (const char* bad : {R"("24:00:00Z")", R"("12:00:00")", R"("12:60:00Z")", R"("12:00Z")", R"("23:59:60Z")"})
        CHECK_FALSE(grammar_accepts(time, bad));
    CHECK(grammar_accepts(date_time, R"("2024-01-31T12:00:00.5Z")"));
    CHECK_FALSE(grammar_accepts(date_time, R"("2024-01-31 12:00:00Z")"));
    CHECK_FALSE(grammar_accepts(date_time, R"("Title page: ")"));
    CHECK(grammar_accepts(uuid, R"("123e4567-e89b-12d3-A456-426614174000")"));
    CHECK_FALSE(grammar_accepts(uuid, R"("123e4567-e89b-12d3-a456-42661417400")"));
    CHECK_FALSE(grammar_accepts(uuid, R"("123e4567-e89b-12d3-a456-42661417400g")"));
    // Another format describes, as OpenAI's strict mode takes it (an SDK's EmailStr): any string.
    CHECK(grammar_accepts(format("email"), R"("not an address")"));
    // A held format beside lengths it would not keep to is refused.
    CHECK_THROWS_WITH(json_schema_to_gbnf(ordered_json::parse(R"({"type": "string", "format": "date-time", "maxLength": 20})")),
                      Catch::Contains("the format 'date-time' beside minLength or maxLength"));
}

TEST_CASE("keywords a grammar cannot enforce are refused by name", "[unit][grammar]") {
    auto error = [](const char* schema) {
        try {
            json_schema_to_gbnf(ordered_json::parse(schema));
        } catch (const UsageError& e) {
            return std::string(e.what());
        }
        return std::string();
    };
    CHECK_THAT(error(R"({"type": "number", "maximum": 2.5})"), Catch::Contains("bounds on a number"));
    CHECK_THAT(error(R"({"type": "integer", "minimum": 3, "exclusiveMaximum": 3})"), Catch::Contains("is empty"));
    CHECK_THAT(error(R"({"type": "object", "properties": {"s": {"type": "string", "pattern": "^a"}}})"),
               Catch::Contains("'pattern'") && Catch::Contains("/properties/s"));
    CHECK_THAT(error(R"({"$ref": "#/$defs/missing"})"), Catch::Contains("names no definition"));
    CHECK_THAT(error(R"({"$ref": "http://example.com/s.json"})"), Catch::Contains("not supported"));
    CHECK_THAT(error(R"({"type": "date"})"), Catch::Contains("unknown type"));
    CHECK_THAT(error(R"(false)"), Catch::Contains("matches no value"));
    CHECK_THAT(error(R"({"type": "array", "minItems": -1})"), Catch::Contains("non-negative"));
    // The other keys' rule nests a group per character of the listed names.
    const std::string long_name = R"({"type": "object", "additionalProperties": true, "properties": {")" +
                                  std::string(100000, 'v') + R"(": {"type": "integer"}}})";
    CHECK_THAT(error(long_name.c_str()), Catch::Contains("longer than 48 characters") && Catch::Contains("/properties"));
    CHECK(error(R"({"type": "object", "additionalProperties": true, "properties": {"a_name_of_forty_eight_characters_xxxxxxxxxxxxxxx": {"type": "integer"}}})")
              .empty());
}

TEST_CASE("rules of the caller's own join a schema's rules under unique names", "[unit][grammar]") {
    JsonSchemaGrammar g;
    const std::string args = g.add_schema(ordered_json::parse(R"({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]})"), "search-args");
    const std::string again = g.add_schema(ordered_json::parse(R"({"type": "integer"})"), "search-args");
    CHECK(args != again);
    CHECK(g.add_rule("string", "[a-z]") != "string");  // a fixed rule's name is kept for it
    g.add_rule("root", gbnf_literal("call \"x\"\n") + " " + args);
    const std::string text = g.gbnf();
    CHECK(grammar_accepts(text, "call \"x\"\n{\"q\": \"hi\"}"));
    CHECK_FALSE(grammar_accepts(text, "call \"x\"\n{\"q\": 1}"));
}
