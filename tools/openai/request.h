#pragma once
// OpenAI requests (POST /v1/chat/completions, /v1/completions) read into what the scheduler
// runs: the prompt's token ids and the generation parameters. Shared by `strata serve` and
// `strata batch`, so that a body means the same thing to both. Every malformed or
// unsupported field is a 400 ApiError naming the field.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "models/chat_reasoning.h"
#include "models/chat_template.h"
#include "models/chat_tools.h"
#include "models/tokenizer.h"
#include "runtime/engine.h"
#include "tools/openai/json_fields.h"

namespace strata::openai {

enum class Endpoint { Chat, Completions };

// "/v1/chat/completions" or "/v1/completions"; nullopt for anything else.
std::optional<Endpoint> endpoint_from_url(std::string_view url);
std::string_view endpoint_url(Endpoint e);

// What reading a request needs from the loaded model.
struct ModelContext {
    const models::Tokenizer& tokenizer;
    const models::ChatTemplate& chat_template;
    int n_ctx;
    std::string model_id;  // echoed when a request names no model
    runtime::Pooling pooling = runtime::Pooling::Last;  // of /v1/embeddings
    int n_embd = 0;
    std::string placement = {};   // the running engine's plan (Plan::to_json), which the page's engine view draws
    runtime::ReasoningBudgetParams reasoning_budget = {};  // a chat request's unless it names its own (--reasoning-budget)
};

struct CompletionRequest {
    Endpoint endpoint = Endpoint::Chat;
    std::string model;             // as the request named it (the server has already found the model it names)
    std::vector<int32_t> prompt;   // templated and tokenized
    runtime::GenerateParams params;  // n_logprobs >= 0 when `logprobs` was asked for
    bool stream = false;
    bool include_usage = false;    // stream_options.include_usage: a last chunk with usage
    int n = 1;                     // choices, each its own sequence sharing the prompt's KV
    std::optional<models::ToolCallSyntax> tools;  // the reply is read for calls in this syntax
    std::optional<models::ReasoningStyle> reasoning;  // the reply's reasoning set apart, written so
};

// /v1/completions without max_tokens generates this many, as OpenAI's API does; chat
// requests without it may fill the context.
inline constexpr int kDefaultCompletionTokens = 16;
// More stop strings than this are refused (OpenAI allows 4).
inline constexpr size_t kMaxStopStrings = 16;
// More choices than this (`n`) are refused.
inline constexpr int kMaxChoices = 16;

// The model's chat template as a chat request shapes it: chat_template_kwargs.enable_thinking
// false (vLLM's and llama.cpp's servers' switch) turns the reasoning off where the template can;
// reasoning_effort, OpenAI's field (or chat_template_kwargs'), "low", "medium" or "high", sets
// gpt-oss's (other families reason as they do). Other template arguments are a 400.
models::ChatTemplate requested_template(const Json& body, const models::ChatTemplate& tmpl);

// Throws ApiError (400) for a body that is not an object, a missing, mistyped, out-of-range or
// unsupported field (best_of, echo, ...), and a prompt that does not fit the context.
CompletionRequest parse_completion_request(Endpoint endpoint, const Json& body, const ModelContext& model);
// The same from the body's text; malformed or too deeply nested JSON is a 400 too.
CompletionRequest parse_completion_request(Endpoint endpoint, std::string_view body, const ModelContext& model);

}  // namespace strata::openai
