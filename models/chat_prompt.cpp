#include "models/chat_prompt.h"

#include <algorithm>
#include <string>
#include <utility>

namespace strata::models {

namespace {

// Markers from Unicode's private use area that no message holds: each control token's text a
// message writes is swapped for one around its index while the template renders, so that where
// it lands in the prompt is known however the template arranged the text around it.
std::string free_marker(const std::vector<ChatMessage>& messages, std::string_view tools_json) {
    for (char32_t c = 0xE000; c < 0xF900; ++c) {
        const std::string m{char(0xE0 | (c >> 12)), char(0x80 | ((c >> 6) & 0x3F)), char(0x80 | (c & 0x3F))};
        const bool used = tools_json.find(m) != std::string_view::npos ||
                          std::any_of(messages.begin(), messages.end(), [&](const ChatMessage& msg) { return msg.content.find(m) != std::string::npos; });
        if (!used) return m;
    }
    return {};  // every one of them used: the text is tokenized as the template wrote it
}

// A message whose control-token text is its own (not the assistant's earlier turns, which the
// templates parse for their reasoning and channels).
bool guarded(const ChatMessage& m) { return m.role != "assistant"; }

}  // namespace

std::vector<int32_t> tokenize_chat(const Tokenizer& tok, const ChatTemplate& tmpl, const std::vector<ChatMessage>& messages,
                                   bool add_generation_prompt, std::string_view tools_json) {
    const std::vector<std::string_view> controls = tok.control_texts();
    auto holds_control = [&](const ChatMessage& m) {
        return guarded(m) && std::any_of(controls.begin(), controls.end(), [&](std::string_view c) { return m.content.find(c) != std::string::npos; });
    };
    std::string prompt;
    std::vector<TextRange> literal;
    const std::string marker = std::any_of(messages.begin(), messages.end(), holds_control) ? free_marker(messages, tools_json) : "";
    if (marker.empty()) {
        prompt = tmpl.render(messages, add_generation_prompt, tools_json);
    } else {
        // Longest first, as the tokenizer matches them.
        std::vector<size_t> order(controls.size());
        for (size_t i = 0; i < order.size(); ++i) order[i] = i;
        std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return controls[a].size() > controls[b].size(); });
        std::vector<ChatMessage> marked = messages;
        for (ChatMessage& m : marked) {
            if (!guarded(m)) continue;
            std::string out;
            for (size_t at = 0; at < m.content.size();) {
                const auto hit = std::find_if(order.begin(), order.end(), [&](size_t i) { return m.content.compare(at, controls[i].size(), controls[i]) == 0; });
                if (hit == order.end()) {
                    out += m.content[at++];
                    continue;
                }
                out += marker + std::to_string(*hit) + marker;
                at += controls[*hit].size();
            }
            m.content = std::move(out);
        }
        const std::string rendered = tmpl.render(marked, add_generation_prompt, tools_json);
        for (size_t at = 0; at < rendered.size();) {
            const size_t open = rendered.find(marker, at);
            const size_t close = open == std::string::npos ? open : rendered.find(marker, open + marker.size());
            if (close == std::string::npos) {
                prompt.append(rendered, at);
                break;
            }
            prompt.append(rendered, at, open - at);
            const std::string index = rendered.substr(open + marker.size(), close - open - marker.size());
            const std::string_view text = controls.at(std::stoul(index));
            literal.push_back({prompt.size(), text.size()});
            prompt += text;
            at = close + marker.size();
        }
    }
    // Templates such as Llama 2's and Llama 3's write the BOS text themselves.
    const std::string bos_text = tok.bos() >= 0 ? tok.piece(tok.bos()) : std::string();
    const bool has_bos = !bos_text.empty() && prompt.rfind(bos_text, 0) == 0 && (literal.empty() || literal.front().off != 0);
    return tok.encode(prompt, tok.add_bos_default() && !has_bos, /*parse_special=*/true, false, literal);
}

}  // namespace strata::models
