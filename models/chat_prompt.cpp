#include "models/chat_prompt.h"

#include <algorithm>
#include <charconv>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "core/error.h"

namespace strata::models {

namespace {

constexpr char32_t kPrivateUseFirst = 0xE000, kPrivateUseEnd = 0xF900;  // the BMP's private use area

std::string utf8_of(char32_t c) {  // a code point of U+0800..U+FFFF
    return {char(0xE0 | (c >> 12)), char(0x80 | ((c >> 6) & 0x3F)), char(0x80 | (c & 0x3F))};
}
// The private-use code point whose UTF-8 starts at s[i], or 0.
char32_t private_use_at(std::string_view s, size_t i) {
    if (i + 3 > s.size() || (uint8_t(s[i]) & 0xF0) != 0xE0 || (uint8_t(s[i + 1]) & 0xC0) != 0x80 || (uint8_t(s[i + 2]) & 0xC0) != 0x80)
        return 0;
    const char32_t c = char32_t(uint8_t(s[i]) & 0x0F) << 12 | char32_t(uint8_t(s[i + 1]) & 0x3F) << 6 | (uint8_t(s[i + 2]) & 0x3F);
    return c >= kPrivateUseFirst && c < kPrivateUseEnd ? c : 0;
}

// Two different private-use code points that never follow one another in `text`: the marker put
// around each control token's text a message writes while the template renders, so that where
// that text lands in the prompt is known however the template arranged what is around it. Two
// different code points cannot form the pair across a marker's edge, and a text holds fewer
// pairs than its bytes, of the 6400 x 6399 there are: one is always free.
std::string free_marker(std::string_view text) {
    std::unordered_set<uint32_t> used;
    for (size_t i = 0; i + 6 <= text.size(); ++i)
        if (const char32_t a = private_use_at(text, i), b = a ? private_use_at(text, i + 3) : 0; b)
            used.insert(uint32_t(a - kPrivateUseFirst) << 16 | uint32_t(b - kPrivateUseFirst));
    for (char32_t a = kPrivateUseFirst; a < kPrivateUseEnd; ++a)
        for (char32_t b = kPrivateUseFirst; b < kPrivateUseEnd; ++b)
            if (a != b && !used.count(uint32_t(a - kPrivateUseFirst) << 16 | uint32_t(b - kPrivateUseFirst)))
                return utf8_of(a) + utf8_of(b);
    throw UsageError("the chat messages are too long to tokenize", "send shorter messages");  // past any request's size
}

// The control tokens' texts, found at a text's positions longest first, as the tokenizer
// matches them: by length, then by a hash of the text (Llama 3 has 256 of them).
class ControlTexts {
public:
    explicit ControlTexts(std::vector<std::string_view> texts) : texts_(std::move(texts)) {
        for (size_t i = 0; i < texts_.size(); ++i) {
            index_.emplace(texts_[i], i);
            first_[uint8_t(texts_[i][0])] = true;
            if (std::find(lengths_.begin(), lengths_.end(), texts_[i].size()) == lengths_.end()) lengths_.push_back(texts_[i].size());
        }
        std::sort(lengths_.rbegin(), lengths_.rend());
    }
    std::string_view text(size_t i) const { return texts_.at(i); }
    // Each control text in s swapped for marker, its index, marker; whether there was one.
    bool mark(std::string& s, const std::string& marker) const {
        std::string out;
        size_t copied = 0;
        for (size_t at = 0; at < s.size(); ++at) {
            if (!first_[uint8_t(s[at])]) continue;
            for (size_t len : lengths_) {
                const auto it = at + len <= s.size() ? index_.find(std::string_view(s).substr(at, len)) : index_.end();
                if (it == index_.end()) continue;
                out.append(s, copied, at - copied).append(marker).append(std::to_string(it->second)).append(marker);
                copied = at + len;
                at = copied - 1;
                break;
            }
        }
        if (copied == 0) return false;
        s = std::move(out.append(s, copied));
        return true;
    }

private:
    std::vector<std::string_view> texts_;
    std::unordered_map<std::string_view, size_t> index_;
    std::vector<size_t> lengths_;
    bool first_[256] = {};
};

// A message whose control-token text is its own: every one but the assistant's earlier turns,
// which the templates parse for their reasoning and channels.
bool guarded(const ChatMessage& m) { return m.role != "assistant"; }

// The rendered text with each marked control text put back, each recorded as a literal range.
std::string unmark(std::string_view rendered, const std::string& marker, const ControlTexts& controls, std::vector<TextRange>& literal) {
    std::string prompt;
    for (size_t at = 0;;) {
        const size_t open = rendered.find(marker, at);
        if (open == std::string_view::npos) return prompt.append(rendered.substr(at));
        const size_t from = open + marker.size(), close = rendered.find(marker, from);
        size_t index = 0;
        const auto [end, ec] = std::from_chars(rendered.data() + from, rendered.data() + std::min(close, rendered.size()), index);
        if (close == std::string_view::npos || ec != std::errc() || end != rendered.data() + close)
            throw UsageError("the chat template split a message's text", "report the model's chat template");
        prompt.append(rendered.substr(at, open - at));
        const std::string_view text = controls.text(index);
        literal.push_back({prompt.size(), text.size()});
        prompt.append(text);
        at = close + marker.size();
    }
}

}  // namespace

std::vector<int32_t> tokenize_chat(const Tokenizer& tok, const ChatTemplate& tmpl, const std::vector<ChatMessage>& messages,
                                   bool add_generation_prompt, std::string_view tools_json) {
    std::string prompt = tmpl.render(messages, add_generation_prompt, tools_json);
    std::vector<TextRange> literal;
    const ControlTexts controls(tok.control_texts());
    // What the request wrote (system, user and tool messages, the tools' descriptions) with its
    // control texts marked, rendered again where it has any.
    const std::string marker = free_marker(prompt);
    std::vector<ChatMessage> marked = messages;
    std::string tools(tools_json);
    bool any = controls.mark(tools, marker);
    for (ChatMessage& m : marked)
        if (guarded(m)) any = controls.mark(m.content, marker) | controls.mark(m.tool_call_id, marker) | any;
    if (any) prompt = unmark(tmpl.render(marked, add_generation_prompt, tools), marker, controls, literal);
    // Templates such as Llama 2's and Llama 3's write the BOS text themselves.
    const std::string bos_text = tok.bos() >= 0 ? tok.piece(tok.bos()) : std::string();
    const bool has_bos = !bos_text.empty() && prompt.rfind(bos_text, 0) == 0 && (literal.empty() || literal.front().off != 0);
    return tok.encode(prompt, tok.add_bos_default() && !has_bos, /*parse_special=*/true, false, literal);
}

}  // namespace strata::models
