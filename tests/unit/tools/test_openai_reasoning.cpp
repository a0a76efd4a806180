// A reasoning model's reply as OpenAI-compatible servers send it: the reasoning in
// `reasoning_content` apart from the content (llama.cpp's reasoning_format, vLLM's
// chat_template_kwargs.enable_thinking), whole and streamed alike.
#include <catch2/catch.hpp>

#include <memory>

#include <nlohmann/json.hpp>

#include "models/gguf_file.h"
#include "models/tokenizer.h"
#include "tests/support/api_errors.h"
#include "tests/support/model_paths.h"
#include "tools/openai/api_error.h"
#include "tools/openai/reply_stream.h"
#include "tools/openai/request.h"
#include "tools/openai/response.h"

using namespace strata;
using namespace strata::openai;
using json = nlohmann::ordered_json;

namespace {

struct Qwen3Model {
    models::GgufFile file = models::GgufFile::open(test::tiny_llama_path());
    std::unique_ptr<models::Tokenizer> tok = models::Tokenizer::from_gguf(file);
    models::ChatTemplate tmpl{models::ChatFamily::Qwen3};
    ModelContext context() const { return {*tok, tmpl, 4096, "tiny"}; }  // room for the tools' system turn
};

const json kChat = {{"model", "x"}, {"messages", {{{"role", "user"}, {"content", "Hello"}}}}};

json with(json base, const std::string& key, json value) {
    base[key] = std::move(value);
    return base;
}

std::string prompt_text(const CompletionRequest& r, const models::Tokenizer& tok) { return tok.decode(r.prompt); }

}  // namespace

TEST_CASE("openai reasoning: a request sets the reasoning apart unless reasoning_format is none, and can turn it off",
          "[unit][openai]") {
    const Qwen3Model m;
    const CompletionRequest plain = parse_completion_request(Endpoint::Chat, kChat, m.context());
    CHECK(plain.reasoning == models::ReasoningStyle::ThinkBlock);
    CHECK_FALSE(parse_completion_request(Endpoint::Chat, with(kChat, "reasoning_format", "none"), m.context()).reasoning);
    CHECK(parse_completion_request(Endpoint::Chat, with(kChat, "reasoning_format", "deepseek"), m.context()).reasoning);

    const CompletionRequest off =
        parse_completion_request(Endpoint::Chat, with(kChat, "chat_template_kwargs", {{"enable_thinking", false}}), m.context());
    const std::string closed = "<think>\n\n</think>\n\n";
    CHECK(prompt_text(off, *m.tok) == prompt_text(plain, *m.tok) + closed);
    const CompletionRequest on =
        parse_completion_request(Endpoint::Chat, with(kChat, "chat_template_kwargs", {{"enable_thinking", true}}), m.context());
    CHECK(on.prompt == plain.prompt);
    const CompletionRequest unsaid =
        parse_completion_request(Endpoint::Chat, with(kChat, "chat_template_kwargs", {{"enable_thinking", nullptr}}), m.context());
    CHECK(unsaid.prompt == plain.prompt);  // null: the template's default
    // A grammar from the first token: a reply that does not open a block is all answer (Qwen3's
    // read so anyway); where the prompt opened one (DeepSeek-R1), nothing is set apart.
    const json json_format = with(kChat, "response_format", {{"type", "json_object"}});
    CHECK(parse_completion_request(Endpoint::Chat, json_format, m.context()).reasoning == models::ReasoningStyle::ThinkBlock);
    CHECK(models::split_reasoning("{\"a\": 1}", models::ReasoningStyle::ThinkBlock).content == "{\"a\": 1}");
    const models::ChatTemplate r1(models::ChatFamily::DeepSeekR1);
    const ModelContext r1_model{*m.tok, r1, 4096, "tiny"};
    CHECK(parse_completion_request(Endpoint::Chat, kChat, r1_model).reasoning == models::ReasoningStyle::OpenedThinkBlock);
    CHECK_FALSE(parse_completion_request(Endpoint::Chat, json_format, r1_model).reasoning);

    auto param = [&](const json& body, Endpoint e = Endpoint::Chat) {
        try {
            parse_completion_request(e, body, m.context());
        } catch (const ApiError& err) {
            return err.param();
        }
        return std::string("(accepted)");
    };
    CHECK(param(with(kChat, "reasoning_format", "raw")) == "reasoning_format");
    CHECK(param(with(kChat, "reasoning_effort", "extreme")) == "reasoning_effort");
    CHECK(param(with(kChat, "chat_template_kwargs", {{"reasoning_effort", "max"}})) == "reasoning_effort");
    CHECK(param(with(kChat, "reasoning_effort", "high")) == "(accepted)");  // Qwen3 reasons as it does
    const json tool = {{"type", "function"}, {"function", {{"name", "f"}}}};
    json with_tools = with(kChat, "tools", json::array({tool}));
    CHECK(param(with_tools) == "(accepted)");
    CHECK(param(with(with_tools, "reasoning_format", "none")) == "reasoning_format");  // calls are read after the reasoning
    CHECK(param(with(kChat, "chat_template_kwargs", {{"add_vision_id", true}})) == "chat_template_kwargs");
    CHECK(param(with(kChat, "chat_template_kwargs", "no")) == "chat_template_kwargs");
    CHECK(param(with(kChat, "chat_template_kwargs", {{"enable_thinking", "no"}})) == "enable_thinking");
    const json completion = {{"model", "x"}, {"prompt", "Once"}, {"reasoning_format", "none"}};
    CHECK(param(completion, Endpoint::Completions) == "reasoning_format");
}

TEST_CASE("openai reasoning: a budget from the request (llama.cpp's or vLLM's field), else the server's", "[unit][openai]") {
    const Qwen3Model m;
    const auto budget = [&](const json& body, const ModelContext& ctx) {
        return parse_completion_request(Endpoint::Chat, body, ctx).params.reasoning_budget;
    };
    CHECK_FALSE(budget(kChat, m.context()).capped());
    const runtime::ReasoningBudgetParams asked = budget(with(kChat, "thinking_budget_tokens", 64), m.context());
    CHECK(asked.capped());
    CHECK(asked.tokens == 64);
    CHECK(asked.style == models::ReasoningStyle::ThinkBlock);
    CHECK(budget(with(kChat, "thinking_token_budget", 0), m.context()).tokens == 0);

    ModelContext server = m.context();
    server.reasoning_budget = {256, std::nullopt, "Time to answer."};
    const runtime::ReasoningBudgetParams by_server = budget(kChat, server);
    CHECK((by_server.tokens == 256 && by_server.message == "Time to answer." && by_server.capped()));
    CHECK(budget(with(kChat, "thinking_budget_tokens", 8), server).tokens == 8);
    CHECK_FALSE(budget(with(kChat, "thinking_budget_tokens", -1), server).capped());  // the request lifts it
    CHECK(budget(with(kChat, "thinking_budget_message", "Answer."), server).message == "Answer.");
    // A template whose model does not reason has nothing to cap.
    const models::ChatTemplate chatml(models::ChatFamily::ChatML);
    CHECK_FALSE(budget(with(kChat, "thinking_budget_tokens", 8), ModelContext{*m.tok, chatml, 4096, "tiny"}).capped());

    const auto param = [&](const json& body, Endpoint e = Endpoint::Chat) {
        return test::param_of([&] { parse_completion_request(e, body, m.context()); });
    };
    CHECK(param(with(kChat, "thinking_budget_tokens", -2)) == "thinking_budget_tokens");
    CHECK(param(with(kChat, "thinking_budget_tokens", "many")) == "thinking_budget_tokens");
    CHECK(param(with(with(kChat, "thinking_budget_tokens", 1), "thinking_token_budget", 2)) == "thinking_token_budget");
    CHECK(param({{"model", "x"}, {"prompt", "Once"}, {"thinking_budget_tokens", 8}}, Endpoint::Completions) == "thinking_budget_tokens");
}

TEST_CASE("openai reasoning: the answer and its stream carry reasoning_content apart, adding up alike", "[unit][openai]") {
    CompletionRequest req;
    req.reasoning = models::ReasoningStyle::ThinkBlock;
    req.tools = models::tool_call_syntax(models::ChatFamily::Qwen3);
    runtime::GenerateResult r;
    r.text = "<think>\nThe weather needs a call.\n</think>\n\nChecking.\n<tool_call>\n{\"name\": \"w\", \"arguments\": {}}\n</tool_call>";
    r.stop_reason = "eos";
    const Choice whole = make_choice(0, r, req);
    CHECK(whole.reasoning == "The weather needs a call.");
    CHECK(whole.text == "Checking.");
    REQUIRE(whole.tool_calls.size() == 1);
    CHECK(whole.finish_reason == "tool_calls");

    const CompletionMeta meta = CompletionMeta::make(Endpoint::Chat, "x");
    const json answer = completion_json(meta, std::vector{whole}, json::object(), *Qwen3Model().tok);
    CHECK(answer["choices"][0]["message"]["reasoning_content"] == "The weather needs a call.");
    CHECK(answer["choices"][0]["message"]["content"] == "Checking.");

    for (size_t piece : {1, 4, 9}) {
        INFO("pieces of " << piece);
        ReplyStream stream(req);
        std::string reasoning, content;
        size_t calls = 0;
        for (size_t at = 0; at < r.text.size(); at += piece) {
            const bool done = at + piece >= r.text.size();
            const ReplyStream::Delta d = stream.next(std::string_view(r.text).substr(at, piece), done, false);
            reasoning += d.reasoning;
            content += d.content;
            calls += d.calls.size();
            const json chunk = text_chunk_json(meta, 0, d.content, false, nullptr, d.reasoning);
            if (!d.reasoning.empty()) CHECK(chunk["choices"][0]["delta"]["reasoning_content"] == d.reasoning);
            if (d.reasoning.empty()) CHECK(chunk["choices"][0]["delta"]["content"] == d.content);
        }
        CHECK(reasoning == whole.reasoning);
        CHECK(content == whole.text);
        CHECK(calls == 1);
        CHECK(stream.called());
    }
}
