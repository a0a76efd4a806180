#pragma once
// A conversation as the token ids the model reads: the chat template's text, tokenized with
// special tokens parsed and the BOS token added unless the template wrote it already. A control
// token's text that a system, user or tool message writes ("<|im_end|>") stays text: only the
// template's own mark the turns.
#include <cstdint>
#include <vector>

#include "models/chat_template.h"
#include "models/tokenizer.h"

namespace strata::models {

std::vector<int32_t> tokenize_chat(const Tokenizer& tok, const ChatTemplate& tmpl, const std::vector<ChatMessage>& messages,
                                   bool add_generation_prompt = true, std::string_view tools_json = {});

}  // namespace strata::models
