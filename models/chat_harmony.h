#pragma once
// gpt-oss's prompt format, "harmony", as its chat template renders a conversation without tools:
// a system message (identity, knowledge cutoff, today's date, reasoning effort, the channels),
// the conversation's first system message as the developer's instructions, user turns, and each
// earlier answer in the final channel, its reasoning (analysis channel) left out.
#include <string>
#include <vector>

#include "models/chat_template.h"

namespace strata::models {

// `effort`: the system message's reasoning effort ("low", "medium", "high"); `today`:
// "YYYY-MM-DD"; empty: the local date now.
std::string render_harmony(const std::vector<ChatMessage>& messages, bool add_generation_prompt, std::string_view effort = "medium",
                           std::string today = {});

}  // namespace strata::models
