#include "models/chat_prompt.h"

namespace strata::models {

std::vector<int32_t> tokenize_chat(const Tokenizer& tok, const ChatTemplate& tmpl, const std::vector<ChatMessage>& messages,
                                   bool add_generation_prompt, std::string_view tools_json) {
    const std::string prompt = tmpl.render(messages, add_generation_prompt, tools_json);
    // Templates such as Llama 2's and Llama 3's write the BOS text themselves.
    const std::string bos_text = tok.bos() >= 0 ? tok.piece(tok.bos()) : std::string();
    const bool has_bos = !bos_text.empty() && prompt.rfind(bos_text, 0) == 0;
    return tok.encode(prompt, tok.add_bos_default() && !has_bos, /*parse_special=*/true);
}

}  // namespace strata::models
