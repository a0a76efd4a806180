#include "models/chat_harmony.h"

#include <fmt/format.h>

#include "models/chat_text.h"

namespace strata::models {

namespace {

// An answer as the model wrote it may still hold its channels: keep the final channel's text.
std::string final_channel(const std::string& content) {
    constexpr std::string_view kFinal = "<|channel|>final<|message|>";
    const size_t at = content.rfind(kFinal);
    if (at == std::string::npos) return content.find("<|channel|>") == std::string::npos ? content : std::string();
    std::string text = content.substr(at + kFinal.size());
    for (std::string_view end : {"<|return|>", "<|end|>"})
        if (const size_t e = text.find(end); e != std::string::npos) text.resize(e);
    return text;
}

}  // namespace

std::string render_harmony(const std::vector<ChatMessage>& messages, bool add_generation_prompt, std::string_view effort,
                           std::string today) {
    if (today.empty()) today = local_date("%Y-%m-%d");
    std::string out = fmt::format(
        "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
        "Knowledge cutoff: 2024-06\nCurrent date: {}\n\nReasoning: {}\n\n"
        "# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|>",
        today, effort);
    size_t first = 0;
    if (!messages.empty() && (messages[0].role == "system" || messages[0].role == "developer")) {
        if (!messages[0].content.empty())
            out += fmt::format("<|start|>developer<|message|># Instructions\n\n{}\n\n<|end|>", messages[0].content);
        first = 1;
    }
    for (size_t i = first; i < messages.size(); ++i) {
        const ChatMessage& m = messages[i];
        if (m.role == "user") {
            out += fmt::format("<|start|>user<|message|>{}<|end|>", m.content);
        } else if (m.role == "assistant") {
            // The last turn of a conversation given for training ends the generation (<|return|>).
            const bool ends = i + 1 == messages.size() && !add_generation_prompt;
            out += fmt::format("<|start|>assistant<|channel|>final<|message|>{}{}", final_channel(m.content),
                               ends ? "<|return|>" : "<|end|>");
        }
    }
    if (add_generation_prompt) out += "<|start|>assistant";
    return out;
}

}  // namespace strata::models
