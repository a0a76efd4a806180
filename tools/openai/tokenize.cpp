#include "tools/openai/tokenize.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "models/chat_prompt.h"
#include "models/unicode.h"
#include "tools/openai/api_error.h"
#include "tools/openai/chat_messages.h"
#include "tools/openai/request.h"
#include "tools/openai/structured_output.h"

namespace strata::openai {

namespace {
void require_object(const Json& body) {
    if (!body.is_object()) throw invalid_request(fmt::format("the request body must be a JSON object, not {}", shown(body)));
}
}  // namespace

Json tokenize_json(const Json& body, const ModelContext& model) {
    require_object(body);
    const Json* content = field(body, "content");
    if (!content || !content->is_string()) throw invalid_request("'content' must be the text to tokenize", "content");
    const models::Tokenizer& tok = model.tokenizer;
    const bool add_special = boolean(body, "add_special");
    const bool parse_special = !field(body, "parse_special") || boolean(body, "parse_special");
    const std::vector<int32_t> ids =
        tok.encode(content->get<std::string>(), add_special && tok.add_bos_default(), parse_special, add_special && tok.add_eos_default());
    if (!boolean(body, "with_pieces")) return {{"tokens", ids}};
    Json tokens = Json::array();
    for (int32_t id : ids) {
        const std::string& piece = tok.piece(id);
        Json shown_piece = piece;
        if (!models::unicode::is_valid_utf8(piece)) {  // part of a character: its bytes
            shown_piece = Json::array();
            for (unsigned char c : piece) shown_piece.push_back(c);
        }
        tokens.push_back({{"id", id}, {"piece", std::move(shown_piece)}});
    }
    return {{"tokens", std::move(tokens)}};
}

Json detokenize_json(const Json& body, const ModelContext& model) {
    require_object(body);
    const Json* tokens = field(body, "tokens");
    if (!tokens || !tokens->is_array()) throw invalid_request("'tokens' must be a list of token ids", "tokens");
    // Each token's piece, as llama.cpp's server joins them: a SentencePiece text keeps the space
    // its first word carries (decode() would drop it, as the one encode() put in front).
    std::string content;
    for (const Json& t : *tokens) {
        if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= model.tokenizer.n_vocab())
            throw invalid_request(fmt::format("'tokens' holds {}, not an id below {}", shown(t), model.tokenizer.n_vocab()), "tokens");
        content += model.tokenizer.piece(t.get<int32_t>());
    }
    return {{"content", content}};
}

Json apply_template_json(const Json& body, const ModelContext& model) {
    require_object(body);
    const std::vector<models::ChatMessage> messages = chat_messages(body);
    try {
        return {{"prompt", requested_template(body, model.chat_template).render(messages, true, offered_tools(body))}};
    } catch (const UsageError& e) {
        throw invalid_request(e.what(), "messages");
    }
}

size_t chat_prompt_tokens(const Json& body, const ModelContext& model) {
    require_object(body);
    const std::vector<models::ChatMessage> messages = chat_messages(body);
    try {
        return models::tokenize_chat(model.tokenizer, requested_template(body, model.chat_template), messages, true, offered_tools(body))
            .size();
    } catch (const UsageError& e) {
        throw invalid_request(e.what(), "messages");
    }
}

}  // namespace strata::openai
