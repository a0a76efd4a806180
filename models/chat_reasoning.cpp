#include "models/chat_reasoning.h"

#include "core/error.h"

namespace strata::models {

namespace {

constexpr std::string_view kBlank = " \t\r\n";
constexpr std::string_view kThinkOpen = "<think>", kThinkClose = "</think>";
constexpr std::string_view kStart = "<|start|>", kChannel = "<|channel|>", kMessage = "<|message|>", kEnd = "<|end|>";
constexpr std::string_view kAnalysis = "<|channel|>analysis";

std::string_view lstrip(std::string_view s) {
    const size_t at = s.find_first_not_of(kBlank);
    return at == std::string_view::npos ? std::string_view() : s.substr(at);
}
std::string_view rstrip(std::string_view s) {
    const size_t at = s.find_last_not_of(kBlank);
    return at == std::string_view::npos ? std::string_view() : s.substr(0, at + 1);
}

// `s` without a tail that may be the start of `marker`.
std::string_view before_partial(std::string_view s, std::string_view marker) {
    for (size_t k = std::min(s.size(), marker.size() - 1); k > 0; --k)
        if (s.ends_with(marker.substr(0, k))) return s.substr(0, s.size() - k);
    return s;
}

// What of `t` is settled, for a reply that may open a <think> block (`opened`: the prompt did).
ReasoningParts parse_think(std::string_view t, bool opened, bool final) {
    std::string_view rest = lstrip(t);
    if (rest.starts_with(kThinkOpen)) {
        rest.remove_prefix(kThinkOpen.size());
        opened = true;
    } else if (!final && kThinkOpen.starts_with(rest)) {
        return {};  // the block may be opening
    }
    if (!opened) return {{}, std::string(t)};
    const size_t close = rest.find(kThinkClose);
    if (close == std::string_view::npos) {
        // Blanks at the reasoning's end wait: the block's close drops them.
        const std::string_view reasoning = lstrip(final ? rest : before_partial(rest, kThinkClose));
        return {std::string(rstrip(reasoning)), {}};
    }
    return {std::string(rstrip(lstrip(rest.substr(0, close)))), std::string(lstrip(rest.substr(close + kThinkClose.size())))};
}

// Harmony's messages: each "<|channel|>name ...<|message|>text", ended by <|end|> (the last one
// by the reply's end), the next opened by "<|start|>assistant". The analysis channel's texts are
// the reasoning; the others' (final), and text outside the format, the answer.
ReasoningParts parse_harmony(std::string_view t, bool final) {
    ReasoningParts p;
    size_t at = 0;
    while (at < t.size()) {
        std::string_view rest = t.substr(at);
        if (rest.starts_with(kStart)) {
            const size_t channel = rest.find(kChannel);
            if (channel == std::string_view::npos) break;  // a header still being written
            at += channel;
            continue;
        }
        if (!rest.starts_with(kChannel)) {
            if (!final && (kChannel.starts_with(rest) || kStart.starts_with(rest))) break;
            p.content += rest;
            break;
        }
        const size_t body = rest.find(kMessage);
        if (body == std::string_view::npos) break;
        const std::string_view header = rest.substr(kChannel.size(), body - kChannel.size());
        const bool analysis = header.substr(0, header.find_first_of(" <")) == "analysis";
        std::string& out = analysis ? p.reasoning : p.content;
        if (!out.empty()) out += '\n';  // a second message of the same kind
        at += body + kMessage.size();
        rest = t.substr(at);
        const size_t end = rest.find(kEnd);
        if (end == std::string_view::npos) {
            out += final ? rest : before_partial(rest, kEnd);
            break;
        }
        out += rest.substr(0, end);
        at += end + kEnd.size();
    }
    return p;
}

ReasoningParts parse(std::string_view t, ReasoningStyle style, bool final) {
    switch (style) {
        case ReasoningStyle::ThinkBlock: return parse_think(t, false, final);
        case ReasoningStyle::OpenedThinkBlock: return parse_think(t, true, final);
        case ReasoningStyle::HarmonyChannels: return parse_harmony(t, final);
    }
    return {{}, std::string(t)};
}

}  // namespace

std::optional<ReasoningStyle> reasoning_style(const ChatTemplate& t) {
    switch (t.family()) {
        case ChatFamily::Qwen3: return ReasoningStyle::ThinkBlock;
        case ChatFamily::DeepSeekR1: return ReasoningStyle::OpenedThinkBlock;
        case ChatFamily::Harmony: return ReasoningStyle::HarmonyChannels;
        default: return std::nullopt;
    }
}

ReasoningParts ReasoningSplit::push(std::string_view text) {
    text_ += text;
    return take(false);
}

ReasoningParts ReasoningSplit::finish() { return take(true); }

ReasoningParts ReasoningSplit::take(bool final) {
    const ReasoningParts now = parse(text_, style_, final);
    // What was sent is settled: each part only grows.
    STRATA_ASSERT(now.reasoning.size() >= reasoning_sent_ && now.content.size() >= content_sent_);
    ReasoningParts d{now.reasoning.substr(reasoning_sent_), now.content.substr(content_sent_)};
    reasoning_sent_ = now.reasoning.size();
    content_sent_ = now.content.size();
    return d;
}

ReasoningParts split_reasoning(std::string_view reply, ReasoningStyle style) { return parse(reply, style, true); }

size_t answer_start(std::string_view reply, ReasoningStyle style) {
    if (style == ReasoningStyle::HarmonyChannels) return 0;  // (no tool format)
    const std::string_view rest = lstrip(reply);
    const bool opens = rest.starts_with(kThinkOpen);
    if (!opens && style == ReasoningStyle::ThinkBlock) return kThinkOpen.starts_with(rest) && !rest.empty() ? std::string_view::npos : 0;
    const size_t close = reply.find(kThinkClose);
    return close == std::string_view::npos ? std::string_view::npos : close + kThinkClose.size();
}

ReasoningOpening reasoning_opening(std::string_view reply, ReasoningStyle style) {
    using State = ReasoningOpening::State;
    if (style == ReasoningStyle::OpenedThinkBlock) return {State::Open, 0};
    const std::string_view rest = lstrip(reply);
    const size_t skipped = reply.size() - rest.size();
    if (style == ReasoningStyle::ThinkBlock) {
        if (rest.starts_with(kThinkOpen)) return {State::Open, skipped + kThinkOpen.size()};
        return kThinkOpen.starts_with(rest) ? ReasoningOpening{} : ReasoningOpening{State::Absent};
    }
    // Harmony: an analysis message first, open once its header is written.
    if (rest.starts_with(kAnalysis)) {
        const size_t body = rest.find(kMessage);
        return body == std::string_view::npos ? ReasoningOpening{} : ReasoningOpening{State::Open, skipped + body + kMessage.size()};
    }
    return kAnalysis.starts_with(rest) ? ReasoningOpening{} : ReasoningOpening{State::Absent};
}

std::string_view reasoning_end(ReasoningStyle style) { return style == ReasoningStyle::HarmonyChannels ? kEnd : kThinkClose; }

std::string_view reasoning_closer(ReasoningStyle style) {
    return style == ReasoningStyle::HarmonyChannels ? "<|end|><|start|>assistant<|channel|>final<|message|>" : "\n</think>\n\n";
}

}  // namespace strata::models
