// Ollama's requests read as the OpenAI requests they amount to: options, format, tools,
// keep_alive and stream mapped; what cannot be honoured is a 400 naming the field.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "runtime/sampler.h"
#include "tools/ollama/duration.h"
#include "tools/ollama/request.h"
#include "tools/openai/api_error.h"
#include "tests/support/api_errors.h"

using namespace strata;
using namespace strata::ollama;
using openai::Json;

using strata::test::param_of;

namespace {
Json chat(Json extra = Json::object()) {
    Json j = {{"model", "m"}, {"messages", Json::array({{{"role", "user"}, {"content", "Hi"}}})}};
    for (auto& [k, v] : extra.items()) j[k] = v;
    return j;
}

}  // namespace

TEST_CASE("ollama requests: durations", "[unit][ollama]") {
    using std::chrono::seconds;
    CHECK(parse_duration("300") == seconds(300));
    CHECK(parse_duration("5m") == seconds(300));
    CHECK(parse_duration("1h30m") == seconds(5400));
    CHECK(parse_duration("1.5s") == seconds(2));
    CHECK(parse_duration("-1") < seconds(0));
    CHECK(parse_duration("-1m") < seconds(0));
    CHECK(parse_duration("0") == seconds(0));
    for (const char* bad : {"", "5 minutes", "m", "5x", "--1"}) CHECK_THROWS_AS(parse_duration(bad), UsageError);
}

TEST_CASE("ollama requests: chat as an OpenAI chat request", "[unit][ollama]") {
    const runtime::SamplerParams cli;
    SECTION("defaults: streamed, the CLI's sampling") {
        const Translated t = translate_chat(chat());
        CHECK(t.model == "m");
        CHECK(t.endpoint == openai::Endpoint::Chat);
        CHECK(t.stream);
        CHECK_FALSE(t.keep_alive);
        CHECK_FALSE(t.load_only);
        CHECK(t.body["temperature"] == cli.temperature);
        CHECK(t.body["top_k"] == cli.top_k);
        CHECK(t.body["top_p"] == cli.top_p);
        CHECK(t.body["min_p"] == cli.min_p);
        CHECK(t.body["messages"][0]["content"] == "Hi");
        CHECK_FALSE(t.body.contains("max_tokens"));
    }
    SECTION("options, format, keep_alive, stream") {
        const Translated t = translate_chat(chat({{"stream", false}, {"keep_alive", "10m"},
                                                  {"options", {{"temperature", 0}, {"seed", 7}, {"num_predict", 20}, {"stop", {"x"}},
                                                               {"num_ctx", 8192}, {"num_gpu", 99}, {"repeat_last_n", -1}, {"mirostat", 0}}},
                                                  {"format", "json"}}));
        CHECK_FALSE(t.stream);
        CHECK(t.keep_alive == std::chrono::seconds(600));
        CHECK(t.body["temperature"] == 0);
        CHECK(t.body["seed"] == 7);
        CHECK(t.num_predict == 20);
        CHECK_FALSE(t.body.contains("max_tokens"));  // cut at the context's end, not refused as max_tokens would be
        CHECK(reply_tokens(t, 100) == 20);
        CHECK(reply_tokens(t, 12) == 12);
        CHECK(t.body["stop"] == Json::array({"x"}));
        CHECK(t.body["repeat_last_n"] == -1);
        CHECK_FALSE(t.body.contains("num_ctx"));  // a load option: the server sizes loads
        CHECK(t.body["response_format"] == Json{{"type", "json_object"}});
        for (int forever : {-1, -2}) {
            const Translated to_end = translate_chat(chat({{"options", {{"num_predict", forever}}}}));
            CHECK_FALSE(to_end.body.contains("max_tokens"));
            CHECK(reply_tokens(to_end, 300) == 300);
        }
    }
    SECTION("a JSON schema as format, not strict: what a grammar cannot hold is left to the model, as Ollama leaves it") {
        const Json schema = {{"type", "object"}, {"properties", {{"age", {{"type", "integer"}}}}}};
        const Translated t = translate_chat(chat({{"format", schema}}));
        CHECK(t.body["response_format"]["type"] == "json_schema");
        CHECK(t.body["response_format"]["json_schema"]["schema"] == schema);
        CHECK(t.body["response_format"]["json_schema"]["strict"] == false);
    }
    SECTION("whole numbers written as floats, and options Ollama takes without effect") {
        const Translated t = translate_chat(chat({{"options", {{"top_k", 40.0}, {"seed", 3.0}, {"num_predict", 10.0},
                                                               {"rope_frequency_base", 1e4}, {"mirostat_tau", 5.0}}}}));
        CHECK(t.body["top_k"].is_number_integer());
        CHECK(t.body["top_k"] == 40);
        CHECK(t.body["seed"] == 3);
        CHECK(t.num_predict == 10);
        CHECK_FALSE(t.body.contains("rope_frequency_base"));
        // A fraction stays one, for the OpenAI request's check to refuse by name.
        CHECK(translate_chat(chat({{"options", {{"top_k", 40.5}}}})).body["top_k"].is_number_float());
    }
    SECTION("tools and tool messages") {
        const Json tools = Json::array({{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", {{"type", "object"}}}}}}});
        Json body = chat({{"tools", tools}});
        body["messages"].push_back({{"role", "assistant"}, {"content", ""},
                                    {"tool_calls", Json::array({{{"function", {{"name", "f"}, {"arguments", {{"a", 1}}}}}}})}});
        body["messages"].push_back({{"role", "tool"}, {"content", "42"}, {"tool_name", "f"}});
        const Translated t = translate_chat(body);
        CHECK(t.body["tools"] == tools);
        CHECK(t.body["messages"][1]["tool_calls"][0]["function"]["arguments"] == Json{{"a", 1}});
        CHECK(t.body["messages"][2]["tool_call_id"] == "f");
    }
    SECTION("no messages: load the model (or unload it with keep_alive 0)") {
        const Translated t = translate_chat({{"model", "m"}, {"keep_alive", 0}});
        CHECK(t.load_only);
        CHECK(t.keep_alive == std::chrono::seconds(0));
    }
}

TEST_CASE("ollama requests: generate, templated or raw", "[unit][ollama]") {
    const Translated t = translate_generate({{"model", "m"}, {"prompt", "Why?"}, {"system", "Be brief."}});
    CHECK(t.endpoint == openai::Endpoint::Chat);
    CHECK(t.body["messages"] == Json::array({{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Why?"}}}));
    const Translated raw = translate_generate({{"model", "m"}, {"prompt", "Once upon"}, {"raw", true}});
    CHECK(raw.endpoint == openai::Endpoint::Completions);
    CHECK(raw.body["prompt"] == "Once upon");
    CHECK(reply_tokens(raw, 300) == 300);  // to the context's end, not OpenAI's 16 tokens
    CHECK(reply_tokens(translate_generate({{"model", "m"}, {"prompt", "x"}, {"raw", true}, {"options", {{"num_predict", 5}}}}), 300) == 5);
    CHECK(translate_generate({{"model", "m"}}).load_only);
}

TEST_CASE("ollama requests: what cannot be honoured is a 400 naming it", "[unit][ollama]") {
    CHECK(param_of([] { translate_chat({{"messages", Json::array()}}); }) == "model");
    CHECK(param_of([] { translate_chat(chat({{"options", {{"mirostat", 2}}}})); }) == "options.mirostat");
    CHECK(param_of([] { translate_chat(chat({{"options", {{"temprature", 0.5}}}})); }) == "options.temprature");
    CHECK(param_of([] { translate_chat(chat({{"options", 5}})); }) == "options");
    CHECK(param_of([] { translate_chat(chat({{"format", "yaml"}})); }) == "format");
    CHECK(param_of([] { translate_chat(chat({{"think", "hard"}})); }) == "think");
    CHECK(param_of([] { translate_chat(chat({{"think", 1}})); }) == "think");
    CHECK(param_of([] { translate_chat(chat({{"keep_alive", "soon"}})); }) == "keep_alive");
    CHECK(param_of([] { translate_chat(chat({{"stream", "yes"}})); }) == "stream");
    CHECK(param_of([] {
              translate_chat({{"model", "m"}, {"messages", Json::array({{{"role", "user"}, {"content", "x"}, {"images", {"aGk="}}}})}});
          }) == "images");
    CHECK(param_of([] { translate_generate({{"model", "m"}, {"prompt", "x"}, {"suffix", "y"}}); }) == "suffix");
    CHECK(param_of([] { translate_generate({{"model", "m"}, {"prompt", "x"}, {"context", {1, 2}}}); }) == "context");
    CHECK(param_of([] { translate_generate({{"model", "m"}, {"prompt", "x"}, {"template", "{{ .Prompt }}"}}); }) == "template");
    CHECK(param_of([] { translate_embed({{"model", "m"}, {"input", 5}}); }) == "input");
    CHECK(param_of([] { translate_embed({{"model", "m"}, {"input", "x"}, {"truncate", "yes"}}); }) == "truncate");
    CHECK(param_of([] { translate_embeddings({{"model", "m"}, {"prompt", 3}}); }) == "prompt");
    // Accepted and harmless: false and empty values of what is refused when set.
    CHECK_NOTHROW(translate_chat(chat({{"think", false}, {"format", ""}})));
}

TEST_CASE("ollama requests: think sets the reasoning apart, or turns it off", "[unit][ollama]") {
    for (const Json& on : {Json(true), Json("low"), Json("high"), Json(nullptr)}) {
        INFO("think: " << on.dump());
        const Translated t = translate_chat(chat({{"think", on}}));
        CHECK(t.show_thinking);
        CHECK_FALSE(t.body.contains("chat_template_kwargs"));  // the template's default: reasoning on
    }
    CHECK(translate_chat(chat()).show_thinking);
    CHECK(translate_chat(chat({{"think", "high"}})).body["reasoning_effort"] == "high");  // gpt-oss's level
    CHECK_FALSE(translate_chat(chat({{"think", true}})).body.contains("reasoning_effort"));
    const Translated off = translate_chat(chat({{"think", false}}));
    CHECK_FALSE(off.show_thinking);
    CHECK(off.body["chat_template_kwargs"] == Json{{"enable_thinking", false}});
    // An answer's thinking sent back is the OpenAI message's reasoning_content, which Qwen3's template reads.
    const Json history = Json::array({{{"role", "user"}, {"content", "Hi"}},
                                      {{"role", "assistant"}, {"content", "Hello"}, {"thinking", "Greet back."}}});
    CHECK(translate_chat({{"model", "m"}, {"messages", history}}).body["messages"][1]["reasoning_content"] == "Greet back.");
    const Translated raw = translate_generate({{"model", "m"}, {"prompt", "x"}, {"raw", true}, {"think", false}});
    CHECK_FALSE(raw.show_thinking);
    CHECK_FALSE(raw.body.contains("chat_template_kwargs"));  // no template to turn it off in
}

TEST_CASE("ollama requests: embeddings as /v1/embeddings bodies", "[unit][ollama]") {
    const EmbedRequest e = translate_embed({{"model", "m"}, {"input", {"a", "b"}}, {"keep_alive", -1}});
    CHECK(e.model == "m");
    CHECK(e.body["input"] == Json::array({"a", "b"}));
    CHECK(e.keep_alive->count() < 0);
    CHECK(translate_embeddings({{"model", "m"}, {"prompt", "a"}}).body["input"] == "a");
    // Ollama truncates an input past the context unless told not to.
    CHECK(e.body["truncate"] == true);
    CHECK(translate_embed({{"model", "m"}, {"input", "a"}, {"truncate", false}}).body["truncate"] == false);
    // No input, or an empty one: the model is only loaded, as Ollama answers it.
    CHECK(translate_embed({{"model", "m"}}).load_only);
    CHECK(translate_embed({{"model", "m"}, {"input", Json::array()}}).load_only);
    CHECK(translate_embeddings({{"model", "m"}, {"prompt", ""}}).load_only);
    CHECK_FALSE(e.load_only);
}

TEST_CASE("ollama requests: a chat past the context loses its oldest turn, never a system message or the last", "[unit][ollama]") {
    Translated t = translate_chat(Json::parse(R"({"model": "m", "messages": [{"role": "system", "content": "S"},
        {"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]})"));
    auto contents = [&] {
        std::vector<std::string> out;
        for (const auto& m : t.body["messages"]) out.push_back(m["content"]);
        return out;
    };
    CHECK(drop_oldest_turn(t));
    CHECK(contents() == std::vector<std::string>{"S", "b", "c"});
    CHECK(drop_oldest_turn(t));
    CHECK(contents() == std::vector<std::string>{"S", "c"});
    CHECK_FALSE(drop_oldest_turn(t));  // the last turn stays: the request is refused as too long
    Translated g = translate_generate(Json::parse(R"({"model": "m", "prompt": "p", "raw": true})"));
    CHECK_FALSE(drop_oldest_turn(g));
}
