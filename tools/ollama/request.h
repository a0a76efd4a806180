#pragma once
// Ollama's requests (POST /api/chat, /api/generate, /api/embed, /api/embeddings) translated
// into the OpenAI bodies Strata already reads (tools/openai/), so that a request means the
// same on either API: messages and tools as they are, `format` ("json" or a JSON schema) as
// `response_format` (the grammar machinery), `options` as the sampling fields (defaults: the
// CLI's, as Ollama's are), num_predict as max_tokens. What Strata cannot honour is a 400
// naming the field, never silently ignored; options that only size a load (num_ctx, num_gpu,
// num_thread, ...) are accepted and have no effect, since the server sizes its loads itself.
#include <chrono>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>  // the translated bodies are values here

#include "tools/openai/json_fields.h"
#include "tools/openai/request.h"

namespace strata::ollama {

using openai::Json;

struct Translated {
    std::string model;              // as the request named it
    openai::Endpoint endpoint = openai::Endpoint::Chat;
    Json body;                      // the OpenAI request it amounts to
    bool stream = true;             // Ollama streams unless told not to
    // keep_alive: how long the model stays loaded after this request; nullopt: the server's.
    std::optional<std::chrono::seconds> keep_alive;
    bool load_only = false;         // no messages or prompt: load (or unload, keep_alive 0) and say so
    bool show_thinking = true;      // the reasoning as `thinking` (think false: left out)
    // options.num_predict where positive; 0 where absent, -1 (for ever) or -2 (fill the context).
    int64_t num_predict = 0;
};

// A chat past the context loses its oldest turn, as Ollama's does: the first message that is not
// a system message, while another follows it. False when there is none to drop (a generate
// request's prompt, a chat of one turn): the request is refused as too long.
bool drop_oldest_turn(Translated& t);

// The most tokens a reply generates with `room` positions left after its prompt: num_predict cut
// at the context's end, as Ollama does (not refused, as OpenAI's max_tokens is), or all of the
// room without one (a raw prompt too, not OpenAI's 16 tokens).
int32_t reply_tokens(const Translated& t, int32_t room);

// Throws ApiError 400 naming the field.
Translated translate_chat(const Json& body);
Translated translate_generate(const Json& body);

struct EmbedRequest {
    std::string model;
    Json body;                      // the /v1/embeddings body
    std::optional<std::chrono::seconds> keep_alive;
    bool load_only = false;  // no input: the model is loaded (or kept, or unloaded) and nothing embedded
};
// /api/embed ({"input": text or texts, "truncate": true by default}) and the older
// /api/embeddings ({"prompt": text}); no input, or an empty one, only loads the model.
EmbedRequest translate_embed(const Json& body);
EmbedRequest translate_embeddings(const Json& body);

// The request's keep_alive: seconds or a duration ("5m", "-1"); nullopt when absent.
std::optional<std::chrono::seconds> keep_alive(const Json& body);
// The `model` a request must name.
std::string model_name(const Json& body);
// The same where older clients send it as "name" (/api/show, /api/pull).
std::string model_or_name(const Json& body);

}  // namespace strata::ollama
