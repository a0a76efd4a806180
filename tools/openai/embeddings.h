#pragma once
// POST /v1/embeddings in OpenAI's shape: `input` a string, a list of strings, a list of token
// ids or a list of such lists; `encoding_format` float or base64 (little-endian float32);
// `dimensions`, when given, must be the model's. The answer lists one unit vector per input.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/engine.h"
#include "tools/openai/json_fields.h"
#include "tools/openai/request.h"

namespace strata::openai {

// Inputs per request at most (OpenAI's limit).
inline constexpr size_t kMaxEmbeddingInputs = 2048;

struct EmbeddingRequest {
    std::string model;
    std::vector<std::vector<int32_t>> inputs;  // tokenized as llama.cpp's server does (BOS, EOS by the model's rule)
    bool base64 = false;
};

// A text as an embedding reads it: tokenized as llama.cpp's server does (BOS and EOS by the
// model's own rule, special tokens parsed).
std::vector<int32_t> embedding_tokens(std::string_view text, const models::Tokenizer& tok);
// Throws ApiError 400 naming the field for a malformed body, an empty input or one past the
// context (unless the body's "truncate" is true, Ollama's: such an input keeps its first tokens).
EmbeddingRequest parse_embedding_request(std::string_view body, const ModelContext& model);
// The same from a body already parsed (the server's, or one translated from Ollama's).
EmbeddingRequest embedding_request(const Json& body, const ModelContext& model);
// {"object": "list", "data": [{"object": "embedding", "index", "embedding"}], "model", "usage"}
Json embedding_json(const EmbeddingRequest& req, std::span<const runtime::GenerateResult> results);
// `bytes` in base64 (RFC 4648, padded).
std::string base64(std::string_view bytes);

}  // namespace strata::openai
