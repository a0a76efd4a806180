#include "tools/openai/embeddings.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tools/openai/api_error.h"

namespace strata::openai {

namespace {

std::vector<int32_t> token_ids(const Json& list, const ModelContext& model, const std::string& where) {
    std::vector<int32_t> ids;
    for (const Json& t : list) {
        if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= model.tokenizer.n_vocab())
            throw invalid_request(fmt::format("'{}' token {} is not an id below {}", where, shown(t), model.tokenizer.n_vocab()), "input");
        ids.push_back(t.get<int32_t>());
    }
    return ids;
}

}  // namespace

std::vector<int32_t> embedding_tokens(std::string_view text, const models::Tokenizer& tok) {
    return tok.encode(text, tok.add_bos_default(), /*parse_special=*/true, tok.add_eos_default());
}

EmbeddingRequest parse_embedding_request(std::string_view text, const ModelContext& model) {
    return embedding_request(parse_json_limited(text, "the request body", "invalid_json"), model);
}

EmbeddingRequest embedding_request(const Json& body, const ModelContext& model) {
    if (!body.is_object()) throw invalid_request(fmt::format("the request body must be a JSON object, not {}", shown(body)));
    EmbeddingRequest req;
    req.model = string_field(body, "model", model.model_id);
    const std::string format = string_field(body, "encoding_format", "float");
    if (format != "float" && format != "base64")
        throw invalid_request(fmt::format("'encoding_format' must be float or base64, not '{}'", format), "encoding_format");
    req.base64 = format == "base64";
    if (const Json* d = field(body, "dimensions"); d && *d != model.n_embd)
        throw invalid_request(fmt::format("'dimensions' must be this model's {} (vectors are not shortened)", model.n_embd), "dimensions");
    const Json* input = field(body, "input");
    if (!input) throw invalid_request("'input' is required", "input");
    if (input->is_string()) {
        req.inputs.push_back(embedding_tokens(input->get<std::string>(), model.tokenizer));
    } else if (input->is_array() && !input->empty() && (*input)[0].is_number_integer()) {
        req.inputs.push_back(token_ids(*input, model, "input"));
    } else if (input->is_array() && !input->empty()) {
        if (input->size() > kMaxEmbeddingInputs)
            throw invalid_request(fmt::format("'input' holds {} inputs; at most {} a request", input->size(), kMaxEmbeddingInputs), "input");
        for (size_t i = 0; i < input->size(); ++i) {
            const Json& one = (*input)[i];
            const std::string where = fmt::format("input[{}]", i);
            if (one.is_string())
                req.inputs.push_back(embedding_tokens(one.get<std::string>(), model.tokenizer));
            else if (one.is_array())
                req.inputs.push_back(token_ids(one, model, where));
            else
                throw invalid_request(fmt::format("'{}' must be a string or a list of token ids, not {}", where, shown(one)), "input");
        }
    } else {
        throw invalid_request("'input' must be a string, a list of strings, token ids, or lists of token ids", "input");
    }
    const bool truncate = boolean(body, "truncate");
    for (size_t i = 0; i < req.inputs.size(); ++i) {
        if (req.inputs[i].empty()) throw invalid_request(fmt::format("input {} is empty", i), "input");
        // An embedding fills at most the context (it generates nothing: runtime::Request::prompt_only).
        if (truncate && static_cast<int64_t>(req.inputs[i].size()) > model.n_ctx) {
            const int32_t last = req.inputs[i].back();
            req.inputs[i].resize(static_cast<size_t>(model.n_ctx));
            // The end token a model's pooling reads (its EOS) stays the last.
            if (model.tokenizer.add_eos_default() && last == model.tokenizer.eos()) req.inputs[i].back() = last;
        }
        if (static_cast<int64_t>(req.inputs[i].size()) > model.n_ctx)
            throw invalid_request(fmt::format("input {} has {} tokens, more than this model's context of {}", i,
                                              req.inputs[i].size(), model.n_ctx),
                                  "input", "context_length_exceeded");
    }
    return req;
}

std::string base64(std::string_view bytes) {
    static constexpr char kDigits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    for (size_t i = 0; i < bytes.size(); i += 3) {
        uint32_t v = static_cast<uint8_t>(bytes[i]) << 16;
        if (i + 1 < bytes.size()) v |= static_cast<uint8_t>(bytes[i + 1]) << 8;
        if (i + 2 < bytes.size()) v |= static_cast<uint8_t>(bytes[i + 2]);
        out += kDigits[(v >> 18) & 63];
        out += kDigits[(v >> 12) & 63];
        out += i + 1 < bytes.size() ? kDigits[(v >> 6) & 63] : '=';
        out += i + 2 < bytes.size() ? kDigits[v & 63] : '=';
    }
    return out;
}

Json embedding_json(const EmbeddingRequest& req, std::span<const runtime::GenerateResult> results) {
    Json data = Json::array();
    size_t n_tokens = 0;
    for (size_t i = 0; i < results.size(); ++i) {
        const std::vector<float>& v = results[i].embedding;
        Json vec;
        if (req.base64)  // the floats as they lie in memory: little-endian on every target Strata builds for
            vec = base64(std::string_view(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)));
        else
            vec = v;
        data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", std::move(vec)}});
        n_tokens += req.inputs[i].size();
    }
    return {{"object", "list"}, {"data", std::move(data)}, {"model", req.model}, {"usage", {{"prompt_tokens", n_tokens}, {"total_tokens", n_tokens}}}};
}

}  // namespace strata::openai
