// Answers in the shapes OpenAI's API reference documents (and its Python client parses):
// chat.completion, text_completion, chat.completion.chunk, usage, log-probabilities, tool
// calls and errors.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>

#include "models/gguf_file.h"
#include "tests/support/model_paths.h"
#include "tools/openai/api_error.h"
#include "tools/openai/response.h"

using namespace strata;
using namespace strata::openai;
using namespace strata::runtime;
using nlohmann::json;

namespace {
GenerateResult result(std::string stop_reason) {
    GenerateResult r;
    r.prompt_tokens = {1, 2, 3, 4};
    r.tokens = {7, 8};
    r.text = "Hi!";
    r.stop_reason = std::move(stop_reason);
    r.cached_tokens = 3;
    r.prefill_seconds = 0.5;
    r.decode_seconds = 0.25;
    r.n_decode_evals = 1;
    return r;
}

CompletionRequest request(Endpoint e) {
    CompletionRequest req;
    req.endpoint = e;
    return req;
}

json whole(const CompletionMeta& meta, const GenerateResult& r, const CompletionRequest& req, const models::Tokenizer* tok = nullptr) {
    const Choice c = make_choice(0, r, req);
    return json(completion_json(meta, {&c, 1}, usage_json({&r, 1}), *tok));
}

struct Vocab {
    models::GgufFile file;
    std::unique_ptr<models::Tokenizer> tok;
    explicit Vocab(const std::filesystem::path& p) : file(models::GgufFile::open(p)), tok(models::Tokenizer::from_gguf(file)) {}
};
}  // namespace

TEST_CASE("openai answers: finish reasons", "[unit][openai]") {
    CHECK(finish_reason("eos") == "stop");
    CHECK(finish_reason("stop") == "stop");
    CHECK(finish_reason("length") == "length");
    CHECK(finish_reason("context") == "length");
    CHECK(finish_reason("cancelled").empty());
    CHECK(finish_reason("error").empty());
}

TEST_CASE("openai answers: whole completions, one choice or several", "[unit][openai]") {
    const std::filesystem::path path = test::tiny_llama_path();
    const Vocab v(path);
    const auto chat = CompletionMeta::make(Endpoint::Chat, "my-model");
    CHECK(chat.id.rfind("chatcmpl-", 0) == 0);
    CHECK(chat.created > 1700000000);
    CHECK(CompletionMeta::make(Endpoint::Chat, "m").id != chat.id);

    const json j = whole(chat, result("eos"), request(Endpoint::Chat), v.tok.get());
    CHECK(j["object"] == "chat.completion");
    CHECK(j["id"] == chat.id);
    CHECK(j["model"] == "my-model");
    CHECK(j["created"] == chat.created);
    REQUIRE(j["choices"].size() == 1);
    CHECK(j["choices"][0]["index"] == 0);
    CHECK(j["choices"][0]["message"] == json({{"role", "assistant"}, {"content", "Hi!"}}));
    CHECK(j["choices"][0]["finish_reason"] == "stop");
    CHECK(j["choices"][0]["logprobs"].is_null());
    CHECK(j["usage"]["prompt_tokens"] == 4);
    CHECK(j["usage"]["completion_tokens"] == 2);
    CHECK(j["usage"]["total_tokens"] == 6);
    CHECK(j["usage"]["prompt_tokens_details"]["cached_tokens"] == 3);
    // Strata's timings: 1 evaluated prompt token (4 less 3 cached) in 0.5 s, 1 decode pass in 0.25 s.
    CHECK(j["usage"]["timings"]["prompt_tokens_per_s"] == 2.0);
    CHECK(j["usage"]["timings"]["decode_tokens_per_s"] == 4.0);
    // A pass that verified a draft and kept two of its tokens: three tokens in 0.25 s.
    GenerateResult speculated = result("eos");
    speculated.tokens = {7, 8, 9, 10};
    speculated.n_drafted = 3;
    speculated.n_accepted = 2;
    CHECK(whole(chat, speculated, request(Endpoint::Chat), v.tok.get())["usage"]["timings"]["decode_tokens_per_s"] == 12.0);

    const auto text = CompletionMeta::make(Endpoint::Completions, "m");
    CHECK(text.id.rfind("cmpl-", 0) == 0);
    const json t = whole(text, result("context"), request(Endpoint::Completions), v.tok.get());
    CHECK(t["object"] == "text_completion");
    CHECK(t["choices"][0]["text"] == "Hi!");
    CHECK_FALSE(t["choices"][0].contains("message"));
    CHECK(t["choices"][0]["finish_reason"] == "length");

    // n choices: indexes in order, the prompt counted once, the choices' tokens together.
    std::vector<GenerateResult> rs = {result("eos"), result("length")};
    rs[1].tokens = {9, 10, 11};
    const std::vector<Choice> cs = {make_choice(0, rs[0], request(Endpoint::Chat)), make_choice(1, rs[1], request(Endpoint::Chat))};
    const json n = completion_json(chat, cs, usage_json(rs), *v.tok);
    REQUIRE(n["choices"].size() == 2);
    CHECK(n["choices"][1]["index"] == 1);
    CHECK(n["choices"][1]["finish_reason"] == "length");
    CHECK(n["usage"]["prompt_tokens"] == 4);
    CHECK(n["usage"]["completion_tokens"] == 5);
}

TEST_CASE("openai answers: log-probabilities in the chat and the completions shapes", "[unit][openai]") {
    const std::filesystem::path path = test::tiny_llama_path();
    const Vocab v(path);
    const int32_t once = *v.tok->find_token("▁Once"), upon = *v.tok->find_token("▁upon"), a = *v.tok->find_token("▁a");
    const std::vector<SampledLogprobs> lps = {{{once, -0.5f}, {{once, -0.5f}, {a, -1.5f}}}, {{upon, -0.25f}, {{upon, -0.25f}, {a, -3.0f}}}};
    const json c = logprobs_json(Endpoint::Chat, lps, *v.tok, 0);
    REQUIRE(c["content"].size() == 2);
    CHECK(c["refusal"].is_null());
    CHECK(c["content"][0]["token"] == " Once");
    CHECK(c["content"][0]["logprob"] == -0.5);
    CHECK(c["content"][0]["bytes"] == json::array({' ', 'O', 'n', 'c', 'e'}));
    CHECK(c["content"][1]["top_logprobs"][1] == json({{"token", " a"}, {"logprob", -3.0}, {"bytes", {' ', 'a'}}}));
    const json t = logprobs_json(Endpoint::Completions, lps, *v.tok, 10);
    CHECK(t["tokens"] == json::array({" Once", " upon"}));
    CHECK(t["token_logprobs"] == json::array({-0.5, -0.25}));
    CHECK(t["top_logprobs"][0] == json({{" Once", -0.5}, {" a", -1.5}}));
    CHECK(t["text_offset"] == json::array({10, 15}));  // " Once" is 5 characters

    GenerateResult r = result("eos");
    r.logprobs = lps;
    CompletionRequest req = request(Endpoint::Chat);
    req.params.n_logprobs = 1;
    const json j = whole(CompletionMeta::make(Endpoint::Chat, "m"), r, req, v.tok.get());
    CHECK(j["choices"][0]["logprobs"] == c);
}

TEST_CASE("openai answers: a reply that calls tools", "[unit][openai]") {
    const std::filesystem::path path = test::tiny_llama_path();
    const Vocab v(path);
    CompletionRequest req = request(Endpoint::Chat);
    req.tools = models::tool_call_syntax(models::ChatFamily::ChatML);
    GenerateResult r = result("eos");
    r.text = "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
    const json j = whole(CompletionMeta::make(Endpoint::Chat, "m"), r, req, v.tok.get());
    const json& msg = j["choices"][0]["message"];
    CHECK(msg["content"] == "Let me look.");
    REQUIRE(msg["tool_calls"].size() == 1);
    CHECK(msg["tool_calls"][0]["type"] == "function");
    CHECK(msg["tool_calls"][0]["id"].get<std::string>().rfind("call_", 0) == 0);
    CHECK(msg["tool_calls"][0]["function"] == json({{"name", "get_weather"}, {"arguments", R"({"city":"Paris"})"}}));
    CHECK(j["choices"][0]["finish_reason"] == "tool_calls");
    // Cut short: the calls that parsed, and "length".
    r.stop_reason = "length";
    CHECK(whole(CompletionMeta::make(Endpoint::Chat, "m"), r, req, v.tok.get())["choices"][0]["finish_reason"] == "length");
    // Mistral's calls carry ids of 9 letters and digits.
    CHECK(tool_call_id(models::tool_call_syntax(models::ChatFamily::Llama2)).size() == 9);
}

TEST_CASE("openai answers: streamed chunks", "[unit][openai]") {
    const auto chat = CompletionMeta::make(Endpoint::Chat, "m");
    const json first = text_chunk_json(chat, 0, "Hel", true, nullptr);
    CHECK(first["object"] == "chat.completion.chunk");
    CHECK(first["choices"][0]["delta"] == json({{"role", "assistant"}, {"content", "Hel"}}));
    CHECK(first["choices"][0]["finish_reason"].is_null());
    const json next = text_chunk_json(chat, 1, "lo", false, nullptr);
    CHECK(next["choices"][0]["delta"] == json({{"content", "lo"}}));
    CHECK(next["choices"][0]["index"] == 1);
    CHECK(next["id"] == first["id"]);
    const json last = final_chunk_json(chat, 0, "length");
    CHECK(last["choices"][0]["delta"] == json::object());
    CHECK(last["choices"][0]["finish_reason"] == "length");
    const GenerateResult r = result("eos");
    const json usage = usage_chunk_json(chat, usage_json({&r, 1}));
    CHECK(usage["choices"] == json::array());
    CHECK(usage["usage"]["total_tokens"] == 6);
    const std::vector<models::ChatToolCall> calls = {{"call_1", "f", "{}"}, {"call_2", "g", "{\"x\":1}"}};
    const json tc = tool_calls_chunk_json(chat, 0, calls, 1, true);
    CHECK(tc["choices"][0]["delta"]["role"] == "assistant");
    CHECK(tc["choices"][0]["delta"]["tool_calls"][1] ==
          json({{"index", 2}, {"id", "call_2"}, {"type", "function"}, {"function", {{"name", "g"}, {"arguments", "{\"x\":1}"}}}}));

    const auto text = CompletionMeta::make(Endpoint::Completions, "m");
    const json t = text_chunk_json(text, 0, "abc", true, nullptr);
    CHECK(t["object"] == "text_completion");
    CHECK(t["choices"][0]["text"] == "abc");
    CHECK(final_chunk_json(text, 0, "stop")["choices"][0]["finish_reason"] == "stop");
}

TEST_CASE("openai answers: errors and invalid UTF-8", "[unit][openai]") {
    const json e = ApiError(503, "busy", "server_error", {}, "queue_full").to_json();
    CHECK(e == json({{"error", {{"message", "busy"}, {"type", "server_error"}, {"param", nullptr}, {"code", "queue_full"}}}}));
    const ApiError bad = invalid_request("no", "stop");
    CHECK(bad.status() == 400);
    CHECK(bad.to_json()["error"]["param"] == "stop");
    CHECK(bad.to_json()["error"]["code"].is_null());

    // A model may end on half a UTF-8 character; the wire text stays valid JSON.
    GenerateResult r = result("length");
    r.text = "ok \xE2\x82";
    const std::filesystem::path path = test::tiny_llama_path();
    const Vocab v(path);
    const std::string wire = dump(whole(CompletionMeta::make(Endpoint::Completions, "m"), r, request(Endpoint::Completions), v.tok.get()));
    const json back = json::parse(wire);
    CHECK(back["choices"][0]["text"] == "ok \xEF\xBF\xBD");
}
