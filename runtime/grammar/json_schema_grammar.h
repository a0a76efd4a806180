#pragma once
// JSON schemas compiled to GBNF, with the rule shapes of llama.cpp's json-schema-to-grammar:
// JSON text whose value validates against the schema, with a little optional whitespace. The
// keywords a grammar can enforce are supported (type, properties, required,
// additionalProperties, items, prefixItems, minItems, maxItems, minLength, maxLength, enum,
// const, anyOf, oneOf, $ref into $defs or definitions, integer bounds, a number's minimum 0); annotations (title, description,
// default, format, ...) are ignored; any other keyword is refused with an error naming it, so
// that every output the grammar allows validates, unless lenient (then such keywords are
// ignored, as llama.cpp does: the output has the schema's shape, its other limits unchecked). Properties come out in the schema's order,
// required ones first; absent additionalProperties means none (as llama.cpp).
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace strata::runtime {

class JsonSchemaGrammar {
public:
    explicit JsonSchemaGrammar(bool lenient = false) : lenient_(lenient) {}
    // Adds the rules for JSON text matching `schema` and returns the name of its rule, derived
    // from `name`. Throws UsageError for a keyword it cannot enforce or a malformed schema.
    std::string add_schema(const nlohmann::ordered_json& schema, const std::string& name);
    // Adds a rule of the caller's own (`body` in GBNF); returns its name, made unique. A rule
    // with the same name and body is added once.
    std::string add_rule(const std::string& name, const std::string& body);
    // The rules so far, one a line.
    std::string gbnf() const;

private:
    std::string visit(const nlohmann::ordered_json& schema, const std::string& name, const std::string& path);
    std::string object_rule(const nlohmann::ordered_json& schema, const std::string& name, const std::string& path);
    std::string array_rule(const nlohmann::ordered_json& schema, const std::string& name, const std::string& path);
    std::string string_rule(const nlohmann::ordered_json& schema, const std::string& name);
    // integer or number, with its bounds (minimum, maximum, exclusive ones) when it has some.
    std::string number_rule(const nlohmann::ordered_json& schema, const std::string& type, const std::string& name, const std::string& path);
    std::string ref_rule(const std::string& ref, const std::string& path);
    // A rule of the fixed set (space, string, number, value, ...) with the rules it uses.
    std::string primitive(const std::string& name);

    bool lenient_;
    std::vector<std::pair<std::string, std::string>> rules_;  // name, body, in the order added
    std::map<std::string, std::string> bodies_;
    const nlohmann::ordered_json* root_ = nullptr;  // the schema being added: what $ref resolves in
    std::map<std::string, std::string> refs_;       // its $refs and their rules
};

// `text` as a GBNF string literal.
std::string gbnf_literal(std::string_view text);
// A whole grammar (start rule `root`) for JSON text matching `schema`.
std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema);

}  // namespace strata::runtime
