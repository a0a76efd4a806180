#include "tools/openai/request.h"

#include <algorithm>
#include <cstdint>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"

#include "models/chat_prompt.h"
#include "tools/openai/api_error.h"
#include "tools/openai/chat_messages.h"
#include "tools/openai/structured_output.h"

namespace strata::openai {


std::optional<Endpoint> endpoint_from_url(std::string_view url) {
    if (url == "/v1/chat/completions") return Endpoint::Chat;
    if (url == "/v1/completions") return Endpoint::Completions;
    return std::nullopt;
}

std::string_view endpoint_url(Endpoint e) {
    return e == Endpoint::Chat ? "/v1/chat/completions" : "/v1/completions";
}

namespace {

// Fields whose features Strata does not have: refused rather than silently ignored.
void refuse_unsupported(const Json& body) {
    if (const Json* v = field(body, "best_of"); v && *v != 1)
        throw invalid_request("'best_of' is not supported; leave it out", "best_of");
    if (const Json* v = field(body, "echo"); v && *v != false)
        throw invalid_request("'echo' is not supported; leave it out", "echo");
    if (const Json* v = field(body, "suffix"); v && *v != "")
        throw invalid_request("'suffix' is not supported; leave it out", "suffix");
    for (const char* key : {"functions", "logit_bias"})
        if (const Json* v = field(body, key); v && !v->empty())
            throw invalid_request(fmt::format("'{}' is not supported; leave it out", key), key);
}

// Chat: `logprobs` true and `top_logprobs`; completions: `logprobs` the number of alternatives.
int requested_logprobs(Endpoint endpoint, const Json& body) {
    const int max = runtime::kMaxTopLogprobs;
    if (endpoint == Endpoint::Completions) return static_cast<int>(integer_in(body, "logprobs", 0, max, -1));
    const int top = static_cast<int>(integer_in(body, "top_logprobs", 0, max, -1));
    if (!boolean(body, "logprobs")) {
        if (top >= 0) throw invalid_request("'top_logprobs' needs 'logprobs': true", "top_logprobs");
        return -1;
    }
    return std::max(top, 0);
}

std::vector<std::string> stop_strings(const Json& body) {
    const Json* v = field(body, "stop");
    if (!v) return {};
    std::vector<std::string> out;
    if (v->is_string()) {
        out.push_back(v->get<std::string>());
    } else if (v->is_array() && v->size() <= kMaxStopStrings) {
        for (const Json& s : *v) {
            if (!s.is_string()) throw invalid_request(fmt::format("'stop' must hold strings, not {}", shown(s)), "stop");
            out.push_back(s.get<std::string>());
        }
    } else {
        throw invalid_request(fmt::format("'stop' must be a string or a list of at most {} strings", kMaxStopStrings), "stop");
    }
    for (const auto& s : out)
        if (s.empty()) throw invalid_request("'stop' strings must not be empty", "stop");
    return out;
}

runtime::SamplerParams sampler_params(const Json& body) {
    // The CLI's temperature (one default everywhere), OpenAI's other defaults: no truncation.
    runtime::SamplerParams s;
    s.temperature = static_cast<float>(number_in(body, "temperature", 0, 2, runtime::SamplerParams{}.temperature));
    s.top_p = static_cast<float>(number_in(body, "top_p", 0, 1, 1.0));
    // llama.cpp's extension; anything past the vocabulary keeps every token, as INT32_MAX does.
    s.top_k = static_cast<int32_t>(std::min<int64_t>(integer_at_least(body, "top_k", 0).value_or(0), INT32_MAX));
    s.min_p = static_cast<float>(number_in(body, "min_p", 0, 1, 0.0));              // llama.cpp's extension
    s.presence_penalty = static_cast<float>(number_in(body, "presence_penalty", -2, 2, 0.0));
    s.frequency_penalty = static_cast<float>(number_in(body, "frequency_penalty", -2, 2, 0.0));
    s.repeat_penalty = static_cast<float>(number_in(body, "repeat_penalty", 0.01, 10, 1.0));
    // llama.cpp's and Ollama's extension; -1: every token so far.
    const int64_t last_n = integer_in(body, "repeat_last_n", -1, INT32_MAX, s.penalty_last_n);
    s.penalty_last_n = last_n < 0 ? INT32_MAX : static_cast<int32_t>(last_n);
    if (const Json* v = field(body, "seed")) {
        if (!v->is_number_integer()) throw invalid_request(fmt::format("'seed' must be an integer, not {}", shown(*v)), "seed");
        // Below 0 (Ollama's default -1, llama.cpp's "random"): a new seed, as when left out.
        s.seed = v->is_number_unsigned() ? v->get<uint64_t>()
                 : v->get<int64_t>() < 0  ? std::random_device{}()
                                          : static_cast<uint64_t>(v->get<int64_t>());
    } else {
        s.seed = std::random_device{}();
    }
    return s;
}

std::vector<int32_t> completion_prompt(const Json& body, const models::Tokenizer& tok) {
    const Json* v = field(body, "prompt");
    if (!v) throw invalid_request("'prompt' is required", "prompt");
    const Json* p = v;
    if (v->is_array() && v->size() == 1 && ((*v)[0].is_string() || (*v)[0].is_array())) p = &(*v)[0];  // a batch of one
    if (p->is_string()) return tok.encode(p->get<std::string>(), tok.add_bos_default(), /*parse_special=*/true);
    if (p->is_array() && !p->empty() && (*p)[0].is_number_integer()) {
        std::vector<int32_t> ids;
        for (const Json& t : *p) {
            if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= tok.n_vocab())
                throw invalid_request(fmt::format("'prompt' token {} is not an id below {}", shown(t), tok.n_vocab()), "prompt");
            ids.push_back(t.get<int32_t>());
        }
        return ids;
    }
    if (p->is_array() && !p->empty())
        throw invalid_request("'prompt' must be one prompt (a string or a list of token ids), not several", "prompt");
    throw invalid_request(fmt::format("'prompt' must be a string or a list of token ids, not {}", shown(*v)), "prompt");
}

// reasoning_format (llama.cpp's server's): "auto" or "deepseek" (the default) sets the reasoning
// apart as `reasoning_content`, "none" leaves it in the content as the model wrote it.
bool reasoning_apart(const Json& body) {
    const std::string format = string_field(body, "reasoning_format", "auto");
    if (format != "auto" && format != "deepseek" && format != "none")
        throw invalid_request(fmt::format("'reasoning_format' must be \"auto\", \"deepseek\" or \"none\", not {}", shown(body["reasoning_format"])),
                              "reasoning_format");
    return format != "none";
}

// A cap on the reply's reasoning: the request's (llama.cpp's thinking_budget_tokens, vLLM's
// thinking_token_budget; -1 lifts the server's), else the server's --reasoning-budget.
runtime::ReasoningBudgetParams reasoning_budget(const Json& body, const runtime::ReasoningBudgetParams& server,
                                                std::optional<models::ReasoningStyle> style) {
    runtime::ReasoningBudgetParams b = server;
    b.style = style;
    const std::optional<int64_t> llama = integer_at_least(body, "thinking_budget_tokens", -1),
                                 vllm = integer_at_least(body, "thinking_token_budget", -1);
    if (llama && vllm) throw invalid_request("give 'thinking_budget_tokens' or 'thinking_token_budget', not both", "thinking_token_budget");
    if (const auto tokens = llama ? llama : vllm) b.tokens = static_cast<int>(std::min<int64_t>(*tokens, INT32_MAX));
    b.message = string_field(body, "thinking_budget_message", b.message);
    return b;
}

}  // namespace

models::ChatTemplate requested_template(const Json& body, const models::ChatTemplate& tmpl) {
    models::ChatTemplate out = tmpl;
    std::string effort = string_field(body, "reasoning_effort", "");
    if (const Json* kwargs = field(body, "chat_template_kwargs")) {
        if (!kwargs->is_object()) throw invalid_request("'chat_template_kwargs' must be an object", "chat_template_kwargs");
        for (const auto& [key, v] : kwargs->items())
            if (key != "enable_thinking" && key != "reasoning_effort")
                throw invalid_request(fmt::format("'chat_template_kwargs.{}' is not supported: only enable_thinking and "
                                                  "reasoning_effort are", key),
                                      "chat_template_kwargs");
        if (field(*kwargs, "enable_thinking") && !boolean(*kwargs, "enable_thinking")) out = out.without_thinking();
        if (kwargs->contains("reasoning_effort")) effort = string_field(*kwargs, "reasoning_effort", "");
    }
    if (effort.empty()) return out;
    try {
        return out.with_reasoning_effort(effort);
    } catch (const UsageError& e) {
        throw invalid_request(e.what(), "reasoning_effort");
    }
}

CompletionRequest parse_completion_request(Endpoint endpoint, const Json& body, const ModelContext& model) {
    if (!body.is_object()) throw invalid_request(fmt::format("the request body must be a JSON object, not {}", shown(body)));
    CompletionRequest req;
    req.endpoint = endpoint;
    if (const Json* m = field(body, "model")) {
        if (!m->is_string()) throw invalid_request(fmt::format("'model' must be a string, not {}", shown(*m)), "model");
        req.model = m->get<std::string>();
    }
    if (req.model.empty()) req.model = model.model_id;  // absent or "": the server's model, named as such
    req.stream = boolean(body, "stream");
    if (const Json* so = field(body, "stream_options")) {
        if (!req.stream) throw invalid_request("'stream_options' is only allowed when 'stream' is true", "stream_options");
        if (!so->is_object()) throw invalid_request("'stream_options' must be an object", "stream_options");
        req.include_usage = boolean(*so, "include_usage");
    }
    refuse_unsupported(body);
    req.params.sampler = sampler_params(body);
    req.params.stop = stop_strings(body);
    req.params.ignore_eos = boolean(body, "ignore_eos");  // llama.cpp's extension: fixed-length runs for benchmarks
    req.n = static_cast<int>(integer_in(body, "n", 1, kMaxChoices, 1));
    req.params.n_logprobs = requested_logprobs(endpoint, body);
    req.params.grammar = output_grammar(body);

    std::optional<int64_t> max_tokens = integer_at_least(body, "max_tokens", 1);
    const char* param = endpoint == Endpoint::Chat ? "messages" : "prompt";
    if (endpoint == Endpoint::Chat) {
        if (auto mct = integer_at_least(body, "max_completion_tokens", 1)) max_tokens = mct;
        const models::ChatTemplate tmpl = requested_template(body, model.chat_template);
        const std::optional<models::ReasoningStyle> style = models::reasoning_style(tmpl);
        // A grammar held from the first token leaves no room for reasoning it does not write: where
        // the prompt opened the reasoning (DeepSeek-R1), the reply is the answer.
        const bool apart = reasoning_apart(body);
        if (apart && !(req.params.grammar && style == models::ReasoningStyle::OpenedThinkBlock)) req.reasoning = style;
        req.params.reasoning_budget = reasoning_budget(body, model.reasoning_budget, style);
        const std::optional<ToolUse> tools = tool_use(body, model.chat_template.family());
        if (tools) {
            if (req.params.grammar) throw invalid_request("'tools' and an output format together are not supported", "tools");
            // Calls are read from the answer, after the reasoning: it has to be set apart.
            if (style && !apart)
                throw invalid_request("'reasoning_format' \"none\" and 'tools' together are not supported for a model that "
                                      "reasons: leave reasoning_format out to have the calls read after the reasoning",
                                      "reasoning_format");
            req.tools = tools->syntax;
            req.params.grammar = tools->grammar;
            req.params.grammar_triggers = tools->triggers;
            // A reasoning model calls after its reasoning: a call's opener in its thoughts starts nothing.
            const auto answer = [style](std::string_view text) { return style ? models::answer_start(text, *style) : 0; };
            req.params.grammar_triggers_from = answer;
            req.params.ends_output = [syntax = tools->syntax, answer](std::string_view text) {
                const size_t at = answer(text);
                return at != std::string_view::npos && models::parse_reply(text.substr(at), syntax).repeated;
            };
        }
        const std::vector<models::ChatMessage> messages = chat_messages(body);
        try {
            req.prompt = models::tokenize_chat(model.tokenizer, tmpl, messages, true, tools ? tools->tools_json : "");
        } catch (const UsageError& e) {
            throw invalid_request(e.what(), "messages");
        }
        // The end of the assistant's turn ends the reply, beside EOS (as `strata chat` does),
        // unless the request asks to generate past the end of text.
        if (std::string eot = model.chat_template.end_of_turn(); !eot.empty() && !req.params.ignore_eos) req.params.stop.push_back(eot);
    } else {
        for (const char* key : {"tools", "reasoning_format", "reasoning_effort", "chat_template_kwargs", "thinking_budget_tokens",
                                "thinking_token_budget", "thinking_budget_message"})
            if (field(body, key)) throw invalid_request(fmt::format("'{}' is for /v1/chat/completions", key), key);
        req.prompt = completion_prompt(body, model.tokenizer);
    }
    const int64_t n_prompt = static_cast<int64_t>(req.prompt.size());
    if (n_prompt == 0) throw invalid_request("the prompt is empty", param);
    // One position is left for the first generated token.
    if (n_prompt >= model.n_ctx)
        throw invalid_request(fmt::format("this model's context holds {} tokens, but the prompt has {}; shorten the {}",
                                          model.n_ctx, n_prompt, param),
                              param, "context_length_exceeded");
    const int64_t room = model.n_ctx - n_prompt;
    if (max_tokens && *max_tokens > room)
        throw invalid_request(fmt::format("this model's context holds {} tokens, but {} were requested ({} in the prompt, "
                                          "{} to generate); shorten the {} or lower max_tokens",
                                          model.n_ctx, n_prompt + *max_tokens, n_prompt, *max_tokens, param),
                              "max_tokens", "context_length_exceeded");
    const int64_t fallback = endpoint == Endpoint::Chat ? room : std::min<int64_t>(room, kDefaultCompletionTokens);
    req.params.n_predict = static_cast<int32_t>(max_tokens.value_or(fallback));
    return req;
}

CompletionRequest parse_completion_request(Endpoint endpoint, std::string_view body, const ModelContext& model) {
    return parse_completion_request(endpoint, parse_json_limited(body, "the request body", "invalid_json"), model);
}

}  // namespace strata::openai
