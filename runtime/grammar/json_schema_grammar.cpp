#include "runtime/grammar/json_schema_grammar.h"

#include <cmath>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "runtime/grammar/integer_range.h"

namespace strata::runtime {

using nlohmann::ordered_json;

namespace {

// The fixed rules and the rules each uses.
struct Primitive {
    const char* name;
    const char* body;
    std::vector<const char*> uses;
};
const std::vector<Primitive>& primitives() {
    static const std::vector<Primitive> p = {
        {"space", R"(| " " | "\n" [ \t]{0,20})", {}},
        {"boolean", R"(("true" | "false") space)", {"space"}},
        {"null", R"("null" space)", {"space"}},
        {"integral-part", R"([0] | [1-9] [0-9]{0,15})", {}},
        {"decimal-part", R"([0-9]{1,16})", {}},
        {"integer", R"(("-"? integral-part) space)", {"integral-part", "space"}},
        // Exponents of two digits at most: every number stays within a double's range.
        {"number", R"(("-"? integral-part) ("." decimal-part)? ([eE] [-+]? [0-9]{1,2})? space)",
         {"integral-part", "decimal-part", "space"}},
        // Any character but a quote, a backslash or a control character, or an escape; \u
        // escapes of surrogates are left out so that a string's length is its characters'.
        {"char", R"([^"\\\x7F\x00-\x1F] | [\\] (["\\/bfnrt] | "u" ([0-9a-cA-CeEfF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2})))", {}},
        {"string", R"("\"" char* "\"" space)", {"char", "space"}},
        {"plain-char", R"([^"\\\x7F\x00-\x1F])", {}},
        // The string formats a grammar holds (RFC 3339's full-date, full-time, date-time; a UUID).
        // Each month's days (February's 29 in any year), and no leap second: what Python's and
        // JavaScript's date parsers (an SDK's `parse`) accept.
        {"date", R"([0-9]{4} "-" (("0" [13578] | "1" [02]) "-" ("0" [1-9] | [12] [0-9] | "3" [01]) | ("0" [469] | "11") "-" ("0" [1-9] | [12] [0-9] | "30") | "02" "-" ("0" [1-9] | "1" [0-9] | "2" [0-9])))",
         {}},
        {"time", R"(([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,9})? ("Z" | [+-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9]))",
         {}},
        {"date-string", R"("\"" date "\"" space)", {"date", "space"}},
        {"time-string", R"("\"" time "\"" space)", {"time", "space"}},
        {"date-time-string", R"("\"" date "T" time "\"" space)", {"date", "time", "space"}},
        {"uuid-string", R"("\"" [0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12} "\"" space)",
         {"space"}},
        {"value", R"(object | array | string | number | boolean | null)", {"object", "array", "string", "number", "boolean", "null"}},
        {"object", R"("{" space ( string ":" space value ("," space string ":" space value)* )? "}" space)", {"string", "space", "value"}},
        {"array", R"("[" space ( value ("," space value)* )? "]" space)", {"value", "space"}},
    };
    return p;
}

const Primitive* find_primitive(const std::string& name) {
    for (const Primitive& p : primitives())
        if (name == p.name) return &p;
    return nullptr;
}

// Keywords that only describe: they never change which values are valid.
bool is_annotation(const std::string& key) {
    static const std::set<std::string> k = {"title", "description", "default", "examples", "$schema", "$id", "$comment", "format",
                                            "deprecated", "readOnly", "writeOnly", "nullable", "strict", "$defs", "definitions"};
    return k.count(key) > 0;
}

bool is_supported(const std::string& key) {
    static const std::set<std::string> k = {"type",     "properties", "required", "additionalProperties", "items", "prefixItems",
                                            "minItems", "maxItems",   "minLength", "maxLength", "enum", "const", "anyOf", "oneOf", "$ref",
                                            "minimum",  "maximum",    "exclusiveMinimum", "exclusiveMaximum"};
    return k.count(key) > 0;
}

// Code points of a UTF-8 string (names in a schema are valid UTF-8: it was parsed as JSON).
std::vector<uint32_t> code_points(const std::string& s) {
    std::vector<uint32_t> out;
    for (size_t i = 0; i < s.size();) {
        const auto b = static_cast<unsigned char>(s[i]);
        const int extra = b < 0x80 ? 0 : (b >> 5) == 6 ? 1 : (b >> 4) == 14 ? 2 : 3;
        uint32_t cp = extra == 0 ? b : b & (0x3fu >> extra);
        for (int k = 1; k <= extra && i + k < s.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
        out.push_back(cp);
        i += static_cast<size_t>(extra) + 1;
    }
    return out;
}

// The rest of a key (written without escapes, before its closing quote) from `node` of a trie
// of names on, spelling none of the names: llama.cpp's _not_strings, except that a proper
// prefix of a name is a key of its own.
struct NameTrie {
    std::map<uint32_t, NameTrie> next;
    bool ends = false;
};
std::string other_than(const NameTrie& node) {
    std::string alts, excluded;
    for (const auto& [cp, child] : node.next) {
        if (cp == '"' || cp == '\\' || cp < 0x20 || cp == 0x7f) continue;  // never in a key written without escapes
        alts += fmt::format("{}\\U{:08X}] {}", alts.empty() ? "[" : " | [", cp, other_than(child));
        excluded += fmt::format("\\U{:08X}", cp);
    }
    alts += fmt::format("{}[^\"\\\\\\x7F\\x00-\\x1F{}] plain-char*", alts.empty() ? "" : " | ", excluded);
    return "(" + alts + ")" + (node.ends ? "" : "?");
}

std::string sanitized(const std::string& name) {
    std::string out;
    for (char c : name) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '-') ? c : '-';
    return out.empty() ? "rule" : out;
}

[[noreturn]] void refuse(const std::string& what, const std::string& path) {
    throw UsageError(fmt::format("JSON schema at {}: {}", path.empty() ? "the top" : path, what),
                     "keywords a grammar enforces: type, properties, required, additionalProperties, items, prefixItems, "
                     "minItems, maxItems, minLength, maxLength, enum, const, anyOf, oneOf, $ref, and minimum/maximum "
                     "(exclusive too) on integers");
}

uint64_t count(const ordered_json& s, const char* key, uint64_t fallback, const std::string& path) {
    auto it = s.find(key);
    if (it == s.end()) return fallback;
    if (!it->is_number_unsigned() && !(it->is_number_integer() && it->get<int64_t>() >= 0))
        refuse(fmt::format("'{}' must be a non-negative integer", key), path);
    return it->get<uint64_t>();
}

// "x{min,max}" in GBNF, max UINT64_MAX meaning unbounded.
std::string repeated(const std::string& x, uint64_t min, uint64_t max) {
    if (min == 0 && max == UINT64_MAX) return x + "*";
    if (min == 1 && max == UINT64_MAX) return x + "+";
    if (max == UINT64_MAX) return fmt::format("{}{{{},}}", x, min);
    if (min == max) return fmt::format("{}{{{}}}", x, min);
    return fmt::format("{}{{{},{}}}", x, min, max);
}

}  // namespace

std::string gbnf_literal(std::string_view text) {
    std::string out = "\"";
    for (char c : text) {
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            default:
                if (static_cast<unsigned char>(c) < 0x20)
                    out += fmt::format("\\x{:02X}", static_cast<unsigned char>(c));
                else
                    out += c;
        }
    }
    return out + "\"";
}

std::string JsonSchemaGrammar::add_rule(const std::string& name, const std::string& body) {
    const std::string base = sanitized(name);
    std::string n = base;
    for (int i = 1;; ++i) {
        const Primitive* p = find_primitive(n);
        auto it = bodies_.find(n);
        if (it == bodies_.end() && (!p || body == p->body)) break;
        if (it != bodies_.end() && it->second == body) return n;
        n = fmt::format("{}-{}", base, i);
    }
    bodies_[n] = body;
    rules_.emplace_back(n, body);
    return n;
}

std::string JsonSchemaGrammar::primitive(const std::string& name) {
    const Primitive* p = find_primitive(name);
    if (!p) throw std::logic_error("unknown primitive rule " + name);
    if (bodies_.count(name)) return name;
    add_rule(name, p->body);
    for (const char* u : p->uses) primitive(u);
    return name;
}

std::string JsonSchemaGrammar::gbnf() const {
    std::string out;
    for (const auto& [name, body] : rules_) out += fmt::format("{} ::= {}\n", name, body);
    return out;
}

std::string JsonSchemaGrammar::add_schema(const ordered_json& schema, const std::string& name) {
    // $ref resolves within this schema only.
    root_ = &schema;
    refs_.clear();
    return visit(schema, name, "");
}

std::string JsonSchemaGrammar::ref_rule(const std::string& ref, const std::string& path) {
    std::string section, def;
    if (ref.rfind("#/$defs/", 0) == 0) {
        section = "$defs";
        def = ref.substr(8);
    } else if (ref.rfind("#/definitions/", 0) == 0) {
        section = "definitions";
        def = ref.substr(14);
    } else {
        refuse(fmt::format("'$ref' {} is not supported: only #/$defs/NAME and #/definitions/NAME", ref), path);
    }
    auto sec = root_->find(section);
    if (sec == root_->end() || !sec->is_object() || !sec->contains(def)) refuse(fmt::format("'$ref' {} names no definition", ref), path);
    auto [it, added] = refs_.try_emplace(ref, "");
    if (!added) return it->second;
    // Named before its body is built, so that a definition may refer to itself (inside an
    // object or an array, never before a character).
    std::string rule = sanitized("ref-" + def);
    while (bodies_.count(rule)) rule += "-r";
    it->second = rule;
    bodies_[rule] = "";
    rules_.emplace_back(rule, "");
    const size_t slot = rules_.size() - 1;
    const std::string body = visit((*sec)[def], rule + "-def", path + "/" + section + "/" + def);
    bodies_[rule] = body;
    rules_[slot].second = body;
    return rule;
}

std::string JsonSchemaGrammar::visit(const ordered_json& s, const std::string& name, const std::string& path) {
    if (s.is_boolean()) {
        if (!s.get<bool>()) refuse("the schema false matches no value", path);
        return primitive("value");
    }
    if (!s.is_object()) refuse(fmt::format("a schema must be an object or a boolean, not {}", s.dump()), path);
    for (const auto& [key, v] : s.items())
        if (!is_supported(key) && !is_annotation(key) && !lenient_) refuse(fmt::format("the keyword '{}' is not supported", key), path);
    if (auto it = s.find("$ref"); it != s.end()) {
        if (!it->is_string()) refuse("'$ref' must be a string", path);
        return ref_rule(it->get<std::string>(), path);
    }
    if (auto it = s.find("const"); it != s.end()) return add_rule(name, gbnf_literal(it->dump()) + " " + primitive("space"));
    if (auto it = s.find("enum"); it != s.end()) {
        if (!it->is_array() || it->empty()) refuse("'enum' must be a non-empty list", path);
        std::string body;
        for (const auto& v : *it) body += (body.empty() ? "" : " | ") + gbnf_literal(v.dump());
        return add_rule(name, "(" + body + ") " + primitive("space"));
    }
    for (const char* key : {"anyOf", "oneOf"})
        if (auto it = s.find(key); it != s.end()) {
            if (!it->is_array() || it->empty()) refuse(fmt::format("'{}' must be a non-empty list of schemas", key), path);
            std::string body;
            for (size_t i = 0; i < it->size(); ++i)
                body += (i ? " | " : "") + visit((*it)[i], fmt::format("{}-{}", name, i), fmt::format("{}/{}/{}", path, key, i));
            return add_rule(name, body);
        }
    auto type = s.find("type");
    if (type != s.end() && type->is_array()) {
        if (type->empty()) refuse("'type' must not be an empty list", path);
        std::string body;
        for (const auto& t : *type) {
            ordered_json one = s;
            one["type"] = t;
            body += (body.empty() ? "" : " | ") + visit(one, name + "-" + (t.is_string() ? t.get<std::string>() : "t"), path);
        }
        return add_rule(name, body);
    }
    const std::string t = type == s.end() ? "" : type->is_string() ? type->get<std::string>() : "?";
    if (t == "object" || (t.empty() && (s.contains("properties") || s.contains("additionalProperties"))))
        return object_rule(s, name, path);
    if (t == "array" || (t.empty() && (s.contains("items") || s.contains("prefixItems")))) return array_rule(s, name, path);
    if (t == "string" || (t.empty() && (s.contains("minLength") || s.contains("maxLength")))) return string_rule(s, name);
    if (t == "integer" || t == "number") return number_rule(s, t, name, path);
    if (t == "boolean" || t == "null") return primitive(t);
    if (t.empty()) return primitive("value");
    refuse(fmt::format("unknown type {}", type->dump()), path);
}

std::string JsonSchemaGrammar::number_rule(const ordered_json& s, const std::string& type, const std::string& name,
                                           const std::string& path) {
    std::optional<int64_t> lo, hi;
    auto bound = [&](const char* key) -> std::optional<double> {
        auto it = s.find(key);
        if (it == s.end()) return std::nullopt;
        if (!it->is_number()) refuse(fmt::format("'{}' must be a number", key), path);
        return it->get<double>();
    };
    const auto min = bound("minimum"), max = bound("maximum"), xmin = bound("exclusiveMinimum"), xmax = bound("exclusiveMaximum");
    if (!min && !max && !xmin && !xmax) return primitive(type);
    if (type == "number") {
        // Non-negative numbers are those without a sign; other bounds on fractions are not enforced.
        if (min && *min == 0 && !max && !xmin && !xmax)
            return add_rule(name, primitive("integral-part") + " (\".\" " + primitive("decimal-part") + ")? ([eE] [-+]? [0-9]{1,2})? " +
                                      primitive("space"));
        if (lenient_) return primitive(type);
        refuse("bounds on a number are supported as \"minimum\": 0 only; use \"integer\" for other ranges", path);
    }
    constexpr double kLimit = 9.2e18;  // within int64 either way
    if (min) lo = static_cast<int64_t>(std::ceil(std::max(*min, -kLimit)));
    if (xmin) lo = std::max(lo.value_or(INT64_MIN), static_cast<int64_t>(std::floor(std::max(*xmin, -kLimit))) + 1);
    if (max) hi = static_cast<int64_t>(std::floor(std::min(*max, kLimit)));
    if (xmax) hi = std::min(hi.value_or(INT64_MAX), static_cast<int64_t>(std::ceil(std::min(*xmax, kLimit))) - 1);
    try {
        return add_rule(name, integer_range_gbnf(lo, hi) + " " + primitive("space"));
    } catch (const UsageError& e) {
        refuse(e.what(), path);
    }
}

std::string JsonSchemaGrammar::string_rule(const ordered_json& s, const std::string& name) {
    // The formats a grammar holds (OpenAI SDKs write them for dates and UUIDs); another (email,
    // hostname, ...) stays a description, as OpenAI's strict mode takes it.
    const bool lengths = s.contains("minLength") || s.contains("maxLength");
    if (auto f = s.find("format"); f != s.end() && f->is_string())
        for (const char* held : {"date", "time", "date-time", "uuid"}) {
            if (*f != held) continue;
            if (!lengths) return primitive(std::string(held) + "-string");
            if (!lenient_) refuse(fmt::format("the format '{}' beside minLength or maxLength", held), name);
        }
    const uint64_t min = count(s, "minLength", 0, name), max = count(s, "maxLength", UINT64_MAX, name);
    if (min == 0 && max == UINT64_MAX) return primitive("string");
    if (max < min) refuse("'maxLength' is below 'minLength'", name);
    return add_rule(name, "\"\\\"\" " + repeated(primitive("char"), min, max) + " \"\\\"\" " + primitive("space"));
}

std::string JsonSchemaGrammar::array_rule(const ordered_json& s, const std::string& name, const std::string& path) {
    const std::string open = "\"[\" " + primitive("space"), close = "\"]\" " + primitive("space");
    const std::string comma = "\",\" " + primitive("space");
    if (auto prefix = s.find("prefixItems"); prefix != s.end()) {
        // A tuple: exactly its items, in order.
        if (!prefix->is_array()) refuse("'prefixItems' must be a list of schemas", path);
        std::string body = open;
        for (size_t i = 0; i < prefix->size(); ++i)
            body += (i ? " " + comma + " " : " ") + visit((*prefix)[i], fmt::format("{}-{}", name, i), fmt::format("{}/prefixItems/{}", path, i));
        return add_rule(name, body + " " + close);
    }
    const uint64_t min = count(s, "minItems", 0, path), max = count(s, "maxItems", UINT64_MAX, path);
    if (max < min) refuse("'maxItems' is below 'minItems'", path);
    auto items = s.find("items");
    const std::string item = items == s.end() ? primitive("value") : visit(*items, name + "-item", path + "/items");
    if (max == 0) return add_rule(name, open + " " + close);
    const std::string more = "(" + comma + " " + item + ")";
    const std::string rest = repeated(more, min > 0 ? min - 1 : 0, max == UINT64_MAX ? max : max - 1);
    const std::string list = item + " " + rest;
    return add_rule(name, open + " " + (min == 0 ? "(" + list + ")?" : list) + " " + close);
}

std::string JsonSchemaGrammar::object_rule(const ordered_json& s, const std::string& name, const std::string& path) {
    std::vector<std::pair<std::string, std::string>> required, optional;  // key, its key-value rule
    std::set<std::string> needed;
    if (auto r = s.find("required"); r != s.end()) {
        if (!r->is_array()) refuse("'required' must be a list of property names", path);
        for (const auto& k : *r) {
            if (!k.is_string()) refuse("'required' must be a list of property names", path);
            needed.insert(k.get<std::string>());
        }
    }
    const std::string colon = primitive("space") + " \":\" " + primitive("space");
    auto kv = [&](const std::string& key, const std::string& value_rule) {
        return add_rule(name + "-" + key + "-kv", gbnf_literal(ordered_json(key).dump()) + " " + colon + " " + value_rule);
    };
    std::set<std::string> listed;
    if (auto props = s.find("properties"); props != s.end()) {
        if (!props->is_object()) refuse("'properties' must be an object", path);
        for (const auto& [key, sub] : props->items()) {
            listed.insert(key);
            const std::string rule = kv(key, visit(sub, name + "-" + key, path + "/properties/" + key));
            (needed.count(key) ? required : optional).emplace_back(key, rule);
        }
    }
    for (const std::string& key : needed)  // required but not described: any value
        if (listed.insert(key).second) required.emplace_back(key, kv(key, primitive("value")));
    std::string extra;
    if (auto ap = s.find("additionalProperties"); ap != s.end() && !(ap->is_boolean() && !ap->get<bool>())) {
        const std::string value = ap->is_boolean() ? primitive("value") : visit(*ap, name + "-additional", path + "/additionalProperties");
        // Its key is none of the listed ones (their values have schemas of their own).
        // The other keys' rule nests a group per character of the listed names (and the GBNF
        // parser bounds nesting): long names beside additionalProperties are refused.
        constexpr size_t kMaxListedName = 48;
        NameTrie names;
        for (const std::string& key : listed) {
            if (code_points(key).size() > kMaxListedName)
                refuse(fmt::format("a property name longer than {} characters beside 'additionalProperties'", kMaxListedName),
                       path + "/properties");
            NameTrie* n = &names;
            for (uint32_t cp : code_points(key)) n = &n->next[cp];
            n->ends = true;
        }
        primitive("plain-char");
        const std::string key = add_rule(name + "-additional-key", "\"\\\"\" " + other_than(names) + " \"\\\"\" " + primitive("space"));
        extra = add_rule(name + "-additional-kv", key + " \":\" " + primitive("space") + " " + value);
    } else if (!s.contains("properties") && !s.contains("required") && ap == s.end()) {
        return primitive("object");  // {"type": "object"}: any object
    }
    const std::string comma = "\",\" " + primitive("space");
    const std::string more_extra = extra.empty() ? "" : " (" + comma + " " + extra + ")*";
    std::string body = "\"{\" " + primitive("space");
    if (!required.empty()) {
        for (size_t i = 0; i < required.size(); ++i) body += (i ? " " + comma + " " : " ") + required[i].second;
        for (const auto& [key, rule] : optional) body += " (" + comma + " " + rule + ")?";
        body += more_extra;
    } else if (!optional.empty() || !extra.empty()) {
        // Any subset in order: the first present one, then each later one optional. The tails
        // are rules so that the size stays linear in the number of properties.
        std::string tail = more_extra;
        std::vector<std::string> starts;
        if (!extra.empty()) starts.push_back(extra + more_extra);
        for (size_t i = optional.size(); i-- > 0;) {
            starts.push_back(optional[i].second + (tail.empty() ? "" : " " + add_rule(fmt::format("{}-tail-{}", name, i), tail)));
            tail = " (" + comma + " " + optional[i].second + ")?" + (tail.empty() ? "" : " " + add_rule(fmt::format("{}-tail-{}", name, i), tail));
        }
        std::string alts;
        for (auto it = starts.rbegin(); it != starts.rend(); ++it) alts += (alts.empty() ? "" : " | ") + *it;
        body += " (" + alts + ")?";
    }
    return add_rule(name, body + " \"}\" " + primitive("space"));
}

std::string json_schema_to_gbnf(const ordered_json& schema) {
    JsonSchemaGrammar g;
    const std::string rule = g.add_schema(schema, "root");
    if (rule != "root") g.add_rule("root", rule);
    return g.gbnf();
}

}  // namespace strata::runtime
