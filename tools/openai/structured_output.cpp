#include "tools/openai/structured_output.h"

#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "runtime/grammar/json_schema_grammar.h"
#include "tools/openai/api_error.h"

namespace strata::openai {

namespace {

// A grammar from GBNF text the request caused; a mistake in it is the request's.
std::shared_ptr<const runtime::Grammar> compile(const std::string& gbnf, const char* param) {
    try {
        return std::make_shared<const runtime::Grammar>(runtime::parse_gbnf(gbnf));
    } catch (const UsageError& e) {
        throw invalid_request(fmt::format("'{}': {}", param, e.what()), param);
    }
}

std::string schema_grammar(const Json& schema, bool strict, const char* param) {
    try {
        runtime::JsonSchemaGrammar g(!strict);
        g.add_rule("root", g.add_schema(schema, "schema"));
        return g.gbnf();
    } catch (const UsageError& e) {
        throw invalid_request(fmt::format("'{}': {}", param, e.what()), param);
    }
}

}  // namespace

std::shared_ptr<const runtime::Grammar> output_grammar(const Json& body) {
    const Json* rf = field(body, "response_format");
    const Json* gbnf = field(body, "grammar");  // llama.cpp's extension
    if (rf && gbnf) throw invalid_request("'response_format' and 'grammar' both shape the output; give one", "grammar");
    if (gbnf) {
        if (!gbnf->is_string()) throw invalid_request("'grammar' must be GBNF text", "grammar");
        return compile(gbnf->get<std::string>(), "grammar");
    }
    if (!rf) return nullptr;
    const Json* t = rf->is_object() ? field(*rf, "type") : nullptr;
    const std::string type = t && t->is_string() ? t->get<std::string>() : "";
    if (type == "text") return nullptr;
    if (type == "json_object") return compile(schema_grammar(Json{{"type", "object"}}, true, "response_format"), "response_format");
    if (type == "json_schema") {
        const Json* js = field(*rf, "json_schema");
        const Json* schema = js && js->is_object() ? field(*js, "schema") : nullptr;
        if (!schema) throw invalid_request("'response_format.json_schema' must be {\"name\", \"schema\", \"strict\"}", "response_format");
        // Strict: every keyword enforced or the schema refused; otherwise the ones a grammar
        // cannot hold (pattern, bounds on fractions, ...) are left to the model.
        const bool strict = js->contains("strict") && (*js)["strict"].is_boolean() && (*js)["strict"].get<bool>();
        return compile(schema_grammar(*schema, strict, "response_format"), "response_format");
    }
    throw invalid_request("'response_format.type' must be text, json_object or json_schema", "response_format");
}

std::optional<ToolUse> tool_use(const Json& body, models::ChatFamily family) {
    const Json* tools = field(body, "tools");
    if (!tools || (tools->is_array() && tools->empty())) {
        if (field(body, "tool_choice") && (*field(body, "tool_choice")) != "none" && (*field(body, "tool_choice")) != "auto")
            throw invalid_request("'tool_choice' asks for a call, but 'tools' offers none", "tool_choice");
        return std::nullopt;
    }
    if (!tools->is_array()) throw invalid_request("'tools' must be a list of {\"type\": \"function\", \"function\": ...}", "tools");
    // Which calls the reply may make: all (auto, required) or one function.
    std::string mode = "auto", named;
    if (const Json* choice = field(body, "tool_choice")) {
        if (choice->is_string() && (*choice == "none" || *choice == "auto" || *choice == "required")) {
            mode = choice->get<std::string>();
        } else if (choice->is_object() && field(*choice, "function") && field((*choice)["function"], "name") &&
                   (*choice)["function"]["name"].is_string()) {
            mode = "named";
            named = (*choice)["function"]["name"].get<std::string>();
        } else {
            throw invalid_request("'tool_choice' must be none, auto, required or {\"type\": \"function\", \"function\": {\"name\"}}",
                                  "tool_choice");
        }
    }
    if (mode == "none") return std::nullopt;
    ToolUse use;
    try {
        use.syntax = models::tool_call_syntax(family);
    } catch (const UsageError& e) {
        throw invalid_request(fmt::format("{}; {}", e.what(), e.hint()), "tools");
    }
    // A named function is called once: a model made to call it would otherwise call it on and on.
    const bool parallel = use.syntax.parallel && mode != "named" && (!field(body, "parallel_tool_calls") || boolean(body, "parallel_tool_calls"));
    // In auto mode a schema keyword the grammar cannot hold is left to the model; when the
    // reply must call, its arguments must validate, so such a schema is refused.
    runtime::JsonSchemaGrammar g(mode == "auto");
    std::string calls;
    std::set<std::string> names;
    bool found = mode != "named";
    for (size_t i = 0; i < tools->size(); ++i) {
        const Json& t = (*tools)[i];
        const std::string where = fmt::format("tools[{}]", i);
        const Json* fn = t.is_object() ? field(t, "function") : nullptr;
        if (!fn || !fn->is_object() || !field(*fn, "name") || !(*fn)["name"].is_string() || (*fn)["name"].get<std::string>().empty())
            throw invalid_request(fmt::format("'{}' must be {{\"type\": \"function\", \"function\": {{\"name\", \"parameters\"}}}}", where), where);
        const std::string name = (*fn)["name"].get<std::string>();
        if (!names.insert(name).second)
            throw invalid_request(fmt::format("'{}.function.name': '{}' is offered twice; each tool needs a name of its own", where, name),
                                  where + ".function.name");
        if (mode == "named" && name != named) continue;
        found = true;
        const Json* params = field(*fn, "parameters");
        std::string args;
        try {
            args = g.add_schema(params ? *params : Json{{"type", "object"}}, name + "-args");
        } catch (const UsageError& e) {
            throw invalid_request(fmt::format("'{}.function.parameters': {}", where, e.what()), where + ".function.parameters");
        }
        const std::string head = "{\"name\": " + Json(name).dump() + ", \"" + use.syntax.args_key + "\": ";
        const std::string id = use.syntax.with_id ? " (" + runtime::gbnf_literal(", \"id\": \"") + " [a-zA-Z0-9]{9} \"\\\"\")?" : "";
        calls += (calls.empty() ? "" : " | ") + g.add_rule(name + "-call", runtime::gbnf_literal(head) + " " + args + id + " \"}\"");
    }
    if (!found) throw invalid_request(fmt::format("'tool_choice' names '{}', which 'tools' does not offer", named), "tool_choice");
    const std::string one = g.add_rule("tool-call", runtime::gbnf_literal(use.syntax.call_open) + " (" + calls + ") " +
                                                        runtime::gbnf_literal(use.syntax.call_close));
    const std::string more = parallel ? " (" + runtime::gbnf_literal(use.syntax.separator) + " " + one + ")*" : "";
    g.add_rule("root", runtime::gbnf_literal(use.syntax.open) + " " + one + more + " " + runtime::gbnf_literal(use.syntax.close));
    use.grammar = compile(g.gbnf(), "tools");
    if (mode == "auto") use.triggers = {use.syntax.trigger};
    use.syntax.function_once = mode == "required";
    use.tools_json = offered_tools(body);
    return use;
}

std::string offered_tools(const Json& body) {
    const Json* tools = field(body, "tools");
    const Json* choice = field(body, "tool_choice");
    if (!tools || !tools->is_array() || tools->empty() || (choice && *choice == "none")) return {};
    return dump(*tools);
}

}  // namespace strata::openai
