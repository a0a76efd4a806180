// OpenAI request bodies read into prompts and generation parameters: each malformed or
// unsupported case is a 400 naming the right field, and valid ones give the prompt the
// tokenizer and chat template give by themselves.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "models/chat_prompt.h"
#include "models/gguf_file.h"
#include "runtime/sampler.h"
#include "tests/support/model_paths.h"
#include "tests/support/grammar_text.h"
#include "tools/openai/api_error.h"
#include "tools/openai/request.h"

using namespace strata;
using namespace strata::models;
using namespace strata::openai;
using nlohmann::json;

namespace {

struct TinyModel {
    GgufFile file;
    std::unique_ptr<Tokenizer> tok;
    ChatTemplate tmpl{ChatFamily::ChatML};
    explicit TinyModel(const std::filesystem::path& p) : file(GgufFile::open(p)), tok(Tokenizer::from_gguf(file)) {}
    ModelContext context(int n_ctx = 256) const { return {*tok, tmpl, n_ctx, "tiny"}; }
};

// The ApiError a body gives, failing the test when it parses.
ApiError error_of(Endpoint e, const json& body, const ModelContext& m) {
    try {
        parse_completion_request(e, body, m);
    } catch (const ApiError& err) {
        return err;
    }
    FAIL("no error for " << body.dump());
    return ApiError(0, "", "");
}

const json kChat = {{"model", "x"}, {"messages", {{{"role", "user"}, {"content", "Hello"}}}}};
const json kCompletion = {{"model", "x"}, {"prompt", "Once upon a time"}};
const json kTools = json::array(
    {{{"type", "function"},
      {"function", {{"name", "get_weather"}, {"parameters", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}, {"required", {"city"}}}}}}},
     {{"type", "function"}, {"function", {{"name", "get_time"}}}}});

// Whether `text` is a whole sentence of the request's grammar.
bool grammar_takes(const CompletionRequest& r, const std::string& text) { return test::grammar_accepts(r.params.grammar, text); }

json with(json base, const std::string& key, json value) {
    base[key] = std::move(value);
    return base;
}

}  // namespace

TEST_CASE("openai requests: malformed bodies and wrong types are 400s naming the field", "[unit][openai]") {
    const std::filesystem::path path = test::tiny_llama_path();
    const TinyModel tiny(path);
    const ModelContext m = tiny.context();

    SECTION("not JSON") {
        try {
            parse_completion_request(Endpoint::Chat, std::string_view("{\"messages\": [}"), m);
            FAIL("parsed");
        } catch (const ApiError& e) {
            CHECK(e.status() == 400);
            CHECK(e.code() == "invalid_json");
        }
    }
    SECTION("not an object") {
        const ApiError e = error_of(Endpoint::Chat, json::array({1, 2}), m);
        CHECK(e.status() == 400);
        CHECK(e.param().empty());
    }
    struct Case {
        Endpoint endpoint;
        json body;
        std::string param;
    };
    const std::vector<Case> cases = {
        {Endpoint::Chat, {{"model", "x"}}, "messages"},
        {Endpoint::Chat, with(kChat, "messages", "hi"), "messages"},
        {Endpoint::Chat, with(kChat, "messages", json::array()), "messages"},
        {Endpoint::Chat, with(kChat, "messages", {{{"role", "robot"}, {"content", "x"}}}), "messages[0].role"},
        {Endpoint::Chat, with(kChat, "messages", {{{"role", "user"}, {"content", 5}}}), "messages[0].content"},
        {Endpoint::Chat, with(kChat, "messages", {{{"role", "user"}}}), "messages[0].content"},
        {Endpoint::Chat, with(kChat, "messages", {{{"role", "user"}, {"content", {{{"type", "image_url"}}}}}}), "messages[0].content"},
        {Endpoint::Chat, with(kChat, "messages", {"hello"}), "messages[0]"},
        {Endpoint::Chat, with(kChat, "model", 5), "model"},
        {Endpoint::Chat, with(kChat, "temperature", "hot"), "temperature"},
        {Endpoint::Chat, with(kChat, "temperature", 2.5), "temperature"},
        {Endpoint::Chat, with(kChat, "top_p", 1.5), "top_p"},
        {Endpoint::Chat, with(kChat, "max_tokens", 0), "max_tokens"},
        {Endpoint::Chat, with(kChat, "max_tokens", "5"), "max_tokens"},
        {Endpoint::Chat, with(kChat, "max_tokens", 1.5), "max_tokens"},
        {Endpoint::Chat, with(kChat, "max_completion_tokens", -1), "max_completion_tokens"},
        {Endpoint::Chat, with(kChat, "n", kMaxChoices + 1), "n"},
        {Endpoint::Chat, with(kChat, "stop", 5), "stop"},
        {Endpoint::Chat, with(kChat, "stop", {"a", 1}), "stop"},
        {Endpoint::Chat, with(kChat, "stop", ""), "stop"},
        {Endpoint::Chat, with(kChat, "stop", std::vector<std::string>(kMaxStopStrings + 1, "x")), "stop"},
        {Endpoint::Chat, with(kChat, "seed", "42"), "seed"},
        {Endpoint::Chat, with(kChat, "seed", 4.2), "seed"},
        {Endpoint::Chat, with(kChat, "stream", "yes"), "stream"},
        {Endpoint::Chat, with(kChat, "stream_options", {{"include_usage", true}}), "stream_options"},
        {Endpoint::Chat, with(kChat, "presence_penalty", 3), "presence_penalty"},
        {Endpoint::Chat, with(kChat, "logprobs", "yes"), "logprobs"},
        {Endpoint::Chat, with(kChat, "top_logprobs", 3), "top_logprobs"},  // without logprobs: true
        {Endpoint::Chat, with(with(kChat, "logprobs", true), "top_logprobs", 21), "top_logprobs"},
        {Endpoint::Chat, with(kChat, "tools", {{{"type", "function"}}}), "tools[0]"},
        {Endpoint::Chat, with(kChat, "tools", "get_weather"), "tools"},
        // Two tools of one name: which one a call means could not be told.
        {Endpoint::Chat, with(kChat, "tools", {kTools[0], kTools[1], kTools[0]}), "tools[2].function.name"},
        {Endpoint::Chat, with(with(kChat, "tools", kTools), "tool_choice", "sometimes"), "tool_choice"},
        {Endpoint::Chat, with(with(kChat, "tools", kTools), "tool_choice", {{"type", "function"}, {"function", {{"name", "nope"}}}}),
         "tool_choice"},
        {Endpoint::Chat, with(kChat, "tool_choice", "required"), "tool_choice"},  // no tools to call
        {Endpoint::Chat, with(with(kChat, "tools", kTools), "response_format", {{"type", "json_object"}}), "tools"},
        {Endpoint::Chat,
         with(with(kChat, "tools", {{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", {{"type", "string"}, {"pattern", "x"}}}}}}}),
              "tool_choice", "required"),
         "tools[0].function.parameters"},
        {Endpoint::Chat, with(kChat, "response_format", {{"type", "xml"}}), "response_format"},
        {Endpoint::Chat, with(kChat, "response_format", {{"type", "json_schema"}}), "response_format"},
        {Endpoint::Chat,
         with(kChat, "response_format",
              {{"type", "json_schema"}, {"json_schema", {{"name", "n"}, {"strict", true}, {"schema", {{"type", "string"}, {"pattern", "^a"}}}}}}),
         "response_format"},
        {Endpoint::Chat, with(kChat, "grammar", "root ::= undefined-rule"), "grammar"},
        {Endpoint::Chat, with(kChat, "messages", {{{"role", "tool"}, {"content", "72F"}}}), "messages[0].tool_call_id"},
        {Endpoint::Chat,
         with(kChat, "messages",
              {{{"role", "assistant"}, {"tool_calls", {{{"id", "c"}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", "{oops"}}}}}}}}),
         "messages[0].tool_calls[0].function.arguments"},
        // A type that is not a string (found by fuzz_openai_request: it escaped as nlohmann's type_error).
        {Endpoint::Chat, with(kChat, "response_format", {{"type", true}}), "response_format"},
        {Endpoint::Chat, with(kChat, "messages", {{{"role", "user"}, {"content", {{{"type", 5}, {"text", "x"}}}}}}),
         "messages[0].content"},
        {Endpoint::Completions, {{"model", "x"}}, "prompt"},
        {Endpoint::Completions, with(kCompletion, "prompt", 42), "prompt"},
        {Endpoint::Completions, with(kCompletion, "prompt", {"one", "two"}), "prompt"},
        {Endpoint::Completions, with(kCompletion, "prompt", {1, 100000}), "prompt"},
        {Endpoint::Completions, with(kCompletion, "prompt", {1, -3}), "prompt"},
        {Endpoint::Completions, with(kCompletion, "echo", true), "echo"},
        {Endpoint::Completions, with(kCompletion, "best_of", 3), "best_of"},
        {Endpoint::Completions, with(kCompletion, "logprobs", 21), "logprobs"},
        {Endpoint::Completions, with(kCompletion, "tools", kTools), "tools"},
        {Endpoint::Completions, with(kCompletion, "n", 0), "n"},
    };
    for (const Case& c : cases) {
        INFO(c.body.dump());
        const ApiError e = error_of(c.endpoint, c.body, m);
        CHECK(e.status() == 400);
        CHECK(e.type() == "invalid_request_error");
        CHECK(e.param() == c.param);
        const json shape = e.to_json();
        CHECK(shape["error"]["message"] == e.what());
        CHECK(shape["error"]["param"] == c.param);
    }
}

TEST_CASE("openai requests: prompts past the context are refused", "[unit][openai]") {
    const std::filesystem::path path = test::tiny_llama_path();
    const TinyModel tiny(path);
    const ModelContext m = tiny.context(32);
    std::string long_text;
    for (int i = 0; i < 40; ++i) long_text += "the cat sat. ";
    REQUIRE(tiny.tok->encode(long_text, true, true).size() >= 32);

    const ApiError chat = error_of(Endpoint::Chat, with(kChat, "messages", {{{"role", "user"}, {"content", long_text}}}), m);
    CHECK(chat.status() == 400);
    CHECK(chat.param() == "messages");
    CHECK(chat.code() == "context_length_exceeded");
    const ApiError completion = error_of(Endpoint::Completions, with(kCompletion, "prompt", long_text), m);
    CHECK(completion.param() == "prompt");
    CHECK(completion.code() == "context_length_exceeded");

    // The prompt fits, but not with the tokens asked for.
    const size_t n_prompt = tiny.tok->encode("Once upon a time", true, true).size();
    const ApiError too_many = error_of(Endpoint::Completions, with(kCompletion, "max_tokens", 32 - n_prompt + 1), m);
    CHECK(too_many.param() == "max_tokens");
    CHECK(too_many.code() == "context_length_exceeded");
    CHECK(parse_completion_request(Endpoint::Completions, with(kCompletion, "max_tokens", 32 - n_prompt), m).params.n_predict ==
          static_cast<int>(32 - n_prompt));
}

TEST_CASE("openai requests: valid bodies give the templated prompt and the parameters", "[unit][openai]") {
    const std::filesystem::path path = test::tiny_llama_path();
    const TinyModel tiny(path);
    const ModelContext m = tiny.context(256);

    SECTION("chat: the chat template's tokens, OpenAI's defaults, the end of turn as a stop string") {
        const json body = {{"messages",
                            {{{"role", "developer"}, {"content", "Be brief."}},
                             {{"role", "user"}, {"content", {{{"type", "text"}, {"text", "Hi "}}, {{"type", "text"}, {"text", "there"}}}}},
                             {{"role", "assistant"}, {"content", nullptr}},
                             {{"role", "user"}, {"content", "Again"}}}},
                           {"temperature", nullptr}};
        const CompletionRequest r = parse_completion_request(Endpoint::Chat, body, m);
        // Text parts on lines of their own.
        const std::vector<ChatMessage> expected = {{"system", "Be brief."}, {"user", "Hi \nthere"}, {"assistant", ""}, {"user", "Again"}};
        CHECK(r.prompt == tokenize_chat(*tiny.tok, tiny.tmpl, expected));
        CHECK(r.model == "tiny");  // none named: the server's
        json unnamed = body;
        unnamed["model"] = "";
        CHECK(parse_completion_request(Endpoint::Chat, unnamed, m).model == "tiny");  // "" names none either
        CHECK(r.params.n_predict == static_cast<int>(256 - r.prompt.size()));
        CHECK(r.params.sampler.temperature == runtime::SamplerParams{}.temperature);  // the CLI's, not OpenAI's 1
        CHECK(r.params.sampler.top_p == 1.0f);
        CHECK(r.params.sampler.top_k == 0);
        CHECK(r.params.sampler.min_p == 0.0f);
        CHECK(r.params.stop == std::vector<std::string>{tiny.tmpl.end_of_turn()});
        CHECK_FALSE(r.stream);
    }
    SECTION("chat: sampling fields and streaming options") {
        json body = kChat;
        body.update({{"temperature", 0}, {"top_p", 0.5}, {"seed", 7}, {"stop", "END"}, {"max_completion_tokens", 5},
                     {"stream", true}, {"stream_options", {{"include_usage", true}}}, {"n", 1}, {"user", "someone"}});
        const CompletionRequest r = parse_completion_request(Endpoint::Chat, body, m);
        CHECK(r.model == "x");
        CHECK(r.params.sampler.temperature == 0.0f);
        CHECK(r.params.sampler.top_p == 0.5f);
        CHECK(r.params.sampler.seed == 7u);
        // Below 0 (Ollama's default -1): a new seed each request, not 2^64 - 1 every time.
        const auto seed_of = [&](int64_t seed) { return parse_completion_request(Endpoint::Chat, with(kChat, "seed", seed), m).params.sampler.seed; };
        CHECK(seed_of(-1) != seed_of(-1));
        CHECK(seed_of(-5) != seed_of(-5));
        CHECK(r.params.n_predict == 5);
        CHECK(r.params.stop.front() == "END");
        CHECK(r.stream);
        CHECK(r.include_usage);
    }
    SECTION("completions: a string is tokenized as `strata generate` does; ids pass as they are") {
        const CompletionRequest r = parse_completion_request(Endpoint::Completions, kCompletion, m);
        CHECK(r.prompt == tiny.tok->encode("Once upon a time", tiny.tok->add_bos_default(), true));
        CHECK(r.params.n_predict == kDefaultCompletionTokens);
        CHECK(r.params.stop.empty());
        const CompletionRequest one = parse_completion_request(Endpoint::Completions, with(kCompletion, "prompt", {"Once upon a time"}), m);
        CHECK(one.prompt == r.prompt);
        const CompletionRequest ids = parse_completion_request(Endpoint::Completions, with(kCompletion, "prompt", {1, 5, 9}), m);
        CHECK(ids.prompt == std::vector<int32_t>{1, 5, 9});
        const CompletionRequest stops =
            parse_completion_request(Endpoint::Completions, with(kCompletion, "stop", {"a", "b"}), m);
        CHECK(stops.params.stop == std::vector<std::string>{"a", "b"});
    }
    SECTION("choices, log-probabilities and output formats") {
        const CompletionRequest r = parse_completion_request(
            Endpoint::Chat, with(with(with(kChat, "n", 3), "logprobs", true), "response_format", {{"type", "json_object"}}), m);
        CHECK(r.n == 3);
        CHECK(r.params.n_logprobs == 0);
        REQUIRE(r.params.grammar);
        CHECK(grammar_takes(r, R"({"a": [1, "x"]})"));
        CHECK_FALSE(grammar_takes(r, R"([1])"));
        CHECK(parse_completion_request(Endpoint::Chat, with(with(kChat, "logprobs", true), "top_logprobs", 5), m).params.n_logprobs == 5);
        CHECK(parse_completion_request(Endpoint::Completions, with(kCompletion, "logprobs", 3), m).params.n_logprobs == 3);
        CHECK(parse_completion_request(Endpoint::Completions, kCompletion, m).params.n_logprobs == -1);
        const json schema = {{"type", "json_schema"},
                             {"json_schema", {{"name", "p"}, {"strict", true}, {"schema", {{"type", "array"}, {"items", {{"type", "boolean"}}}}}}}};
        const CompletionRequest js = parse_completion_request(Endpoint::Completions, with(kCompletion, "response_format", schema), m);
        CHECK(grammar_takes(js, "[true, false]"));
        CHECK_FALSE(grammar_takes(js, "[1]"));
        const CompletionRequest gbnf = parse_completion_request(Endpoint::Completions, with(kCompletion, "grammar", R"(root ::= "yes" | "no")"), m);
        CHECK(grammar_takes(gbnf, "no"));
        CHECK(parse_completion_request(Endpoint::Chat, with(kChat, "response_format", {{"type", "text"}}), m).params.grammar == nullptr);
    }
    SECTION("tools: offered in the prompt, calls held to their grammar, lazily unless a call is required") {
        const ModelContext m = tiny.context(2048);  // stories260K spells the tools' text nearly a byte a token
        const CompletionRequest plain = parse_completion_request(Endpoint::Chat, kChat, m);
        const CompletionRequest aut = parse_completion_request(Endpoint::Chat, with(kChat, "tools", kTools), m);
        REQUIRE(aut.tools);
        CHECK(aut.params.grammar_triggers == std::vector<std::string>{"<tool_call>"});
        // (The test's bodies are nlohmann::json, whose keys sort; a body read from text keeps its order.)
        CHECK(tiny.tok->decode(aut.prompt).find("<tools>\n{\"function\": {\"name\": \"get_weather\"") != std::string::npos);
        CHECK(aut.prompt.size() > plain.prompt.size());
        const std::string weather = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
        const std::string time = "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
        CHECK(grammar_takes(aut, weather));
        CHECK(grammar_takes(aut, weather + "\n" + time));  // parallel calls
        CHECK_FALSE(grammar_takes(aut, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"town\": \"Paris\"}}\n</tool_call>"));
        const CompletionRequest required = parse_completion_request(Endpoint::Chat, with(with(kChat, "tools", kTools), "tool_choice", "required"), m);
        CHECK(required.params.grammar_triggers.empty());
        // A model made to call may repeat its call until max_tokens: the repeat ends the reply.
        REQUIRE(required.params.ends_output);
        CHECK_FALSE(required.params.ends_output(weather + "\n" + time));
        CHECK(required.params.ends_output(weather + "\n" + time + "\n" + weather));
        const std::string london = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"London\"}}\n</tool_call>";
        CHECK(required.params.ends_output(weather + "\n" + london));  // made to call: once per function
        CHECK_FALSE(aut.params.ends_output(weather + "\n" + london));  // free to call: Paris, then London
        const CompletionRequest single = parse_completion_request(
            Endpoint::Chat, with(with(with(kChat, "tools", kTools), "tool_choice", "required"), "parallel_tool_calls", false), m);
        CHECK_FALSE(grammar_takes(single, weather + "\n" + time));
        const json named_choice = {{"type", "function"}, {"function", {{"name", "get_time"}}}};
        const CompletionRequest named = parse_completion_request(Endpoint::Chat, with(with(kChat, "tools", kTools), "tool_choice", named_choice), m);
        CHECK(grammar_takes(named, time));
        CHECK_FALSE(grammar_takes(named, weather));
        const CompletionRequest none = parse_completion_request(Endpoint::Chat, with(with(kChat, "tools", kTools), "tool_choice", "none"), m);
        CHECK_FALSE(none.tools);
        CHECK(none.prompt == plain.prompt);
        // A conversation that called a tool and got its result.
        const json history = {{{"role", "user"}, {"content", "Weather?"}},
                              {{"role", "assistant"}, {"content", nullptr},
                               {"tool_calls", {{{"id", "call_1"}, {"type", "function"}, {"function", {{"name", "get_weather"}, {"arguments", R"({"city": "Paris"})"}}}}}}},
                              {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "22 C"}}};
        const CompletionRequest answered = parse_completion_request(Endpoint::Chat, with(with(kChat, "tools", kTools), "messages", history), m);
        CHECK(tiny.tok->decode(answered.prompt).find("<tool_response>\n22 C\n</tool_response>") != std::string::npos);
    }
    SECTION("endpoints by URL") {
        CHECK(endpoint_from_url("/v1/chat/completions") == Endpoint::Chat);
        CHECK(endpoint_from_url("/v1/completions") == Endpoint::Completions);
        CHECK_FALSE(endpoint_from_url("/v1/embeddings"));
        CHECK(endpoint_url(Endpoint::Chat) == "/v1/chat/completions");
    }
}
