// Answers in the shapes OpenAI's API reference documents (and its Python client parses):
// chat.completion, text_completion, chat.completion.chunk, usage and errors.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

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
    return r;
}
}  // namespace

TEST_CASE("openai answers: finish reasons", "[unit][openai]") {
    CHECK(finish_reason("eos") == "stop");
    CHECK(finish_reason("stop") == "stop");
    CHECK(finish_reason("length") == "length");
    CHECK(finish_reason("context") == "length");
    CHECK(finish_reason("cancelled").empty());
    CHECK(finish_reason("error").empty());
}

TEST_CASE("openai answers: whole completions", "[unit][openai]") {
    const auto chat = CompletionMeta::make(Endpoint::Chat, "my-model");
    CHECK(chat.id.rfind("chatcmpl-", 0) == 0);
    CHECK(chat.created > 1700000000);
    CHECK(CompletionMeta::make(Endpoint::Chat, "m").id != chat.id);

    const json j = completion_json(chat, result("eos"));
    CHECK(j["object"] == "chat.completion");
    CHECK(j["id"] == chat.id);
    CHECK(j["model"] == "my-model");
    CHECK(j["created"] == chat.created);
    REQUIRE(j["choices"].size() == 1);
    CHECK(j["choices"][0]["index"] == 0);
    CHECK(j["choices"][0]["message"] == json({{"role", "assistant"}, {"content", "Hi!"}}));
    CHECK(j["choices"][0]["finish_reason"] == "stop");
    CHECK(j["usage"]["prompt_tokens"] == 4);
    CHECK(j["usage"]["completion_tokens"] == 2);
    CHECK(j["usage"]["total_tokens"] == 6);
    CHECK(j["usage"]["prompt_tokens_details"]["cached_tokens"] == 3);

    const auto text = CompletionMeta::make(Endpoint::Completions, "m");
    CHECK(text.id.rfind("cmpl-", 0) == 0);
    const json t = completion_json(text, result("context"));
    CHECK(t["object"] == "text_completion");
    CHECK(t["choices"][0]["text"] == "Hi!");
    CHECK_FALSE(t["choices"][0].contains("message"));
    CHECK(t["choices"][0]["finish_reason"] == "length");
}

TEST_CASE("openai answers: streamed chunks", "[unit][openai]") {
    const auto chat = CompletionMeta::make(Endpoint::Chat, "m");
    const json first = text_chunk_json(chat, "Hel", true);
    CHECK(first["object"] == "chat.completion.chunk");
    CHECK(first["choices"][0]["delta"] == json({{"role", "assistant"}, {"content", "Hel"}}));
    CHECK(first["choices"][0]["finish_reason"].is_null());
    const json next = text_chunk_json(chat, "lo", false);
    CHECK(next["choices"][0]["delta"] == json({{"content", "lo"}}));
    CHECK(next["id"] == first["id"]);
    const json last = final_chunk_json(chat, "length");
    CHECK(last["choices"][0]["delta"] == json::object());
    CHECK(last["choices"][0]["finish_reason"] == "length");
    const json usage = usage_chunk_json(chat, result("eos"));
    CHECK(usage["choices"] == json::array());
    CHECK(usage["usage"]["total_tokens"] == 6);

    const auto text = CompletionMeta::make(Endpoint::Completions, "m");
    const json t = text_chunk_json(text, "abc", true);
    CHECK(t["object"] == "text_completion");
    CHECK(t["choices"][0]["text"] == "abc");
    CHECK(final_chunk_json(text, "stop")["choices"][0]["finish_reason"] == "stop");
}

TEST_CASE("openai answers: errors and invalid UTF-8", "[unit][openai]") {
    const json e = ApiError(429, "busy", "rate_limit_error", {}, "queue_full").to_json();
    CHECK(e == json({{"error", {{"message", "busy"}, {"type", "rate_limit_error"}, {"param", nullptr}, {"code", "queue_full"}}}}));
    const ApiError bad = invalid_request("no", "stop");
    CHECK(bad.status() == 400);
    CHECK(bad.to_json()["error"]["param"] == "stop");
    CHECK(bad.to_json()["error"]["code"].is_null());

    // A model may end on half a UTF-8 character; the wire text stays valid JSON.
    GenerateResult r = result("length");
    r.text = "ok \xE2\x82";
    const std::string wire = dump(completion_json(CompletionMeta::make(Endpoint::Completions, "m"), r));
    const json back = json::parse(wire);
    CHECK(back["choices"][0]["text"] == "ok \xEF\xBF\xBD");
}
