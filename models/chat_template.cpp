#include "models/chat_template.h"

#include <array>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"
#include "models/chat_harmony.h"
#include "models/chat_text.h"
#include "models/chat_tools.h"
#include "models/gguf_file.h"

namespace strata::models {

namespace {
constexpr std::array<std::pair<std::string_view, ChatFamily>, 11> kFamilies = {{
    {"chatml", ChatFamily::ChatML},       {"qwen3", ChatFamily::Qwen3},         {"llama3", ChatFamily::Llama3},
    {"llama2", ChatFamily::Llama2},       {"zephyr", ChatFamily::Zephyr},       {"gemma", ChatFamily::Gemma},
    {"phi3", ChatFamily::Phi3},           {"deepseek2", ChatFamily::DeepSeek2}, {"deepseek3", ChatFamily::DeepSeek3},
    {"deepseek-r1", ChatFamily::DeepSeekR1}, {"harmony", ChatFamily::Harmony},
}};
// DeepSeek's special tokens: fullwidth bars (U+FF5C) and U+2581 for spaces.
constexpr std::string_view kDsUser = "<\xef\xbd\x9cUser\xef\xbd\x9c>";
constexpr std::string_view kDsAssistant = "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>";
constexpr std::string_view kDsEnd = "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>";

// The default system prompt a ChatML template hard-codes, e.g. SmolLM2's
// "{{ '<|im_start|>system\nYou are a helpful AI assistant ...<|im_end|>\n' }}".
// The newline may be written as Jinja's escape ("system\\n" in the template's text, as Qwen's).
std::string embedded_system_prompt(const std::string& tmpl) {
    for (const std::string open : {"<|im_start|>system\n", "<|im_start|>system\\n"}) {
        for (auto a = tmpl.find(open); a != std::string::npos; a = tmpl.find(open, a + 1)) {
            const auto b = tmpl.find("<|im_end|>", a + open.size());
            if (b == std::string::npos) break;
            std::string s = tmpl.substr(a + open.size(), b - a - open.size());
            // Only text inside one Jinja string literal is a default: an expression or the
            // string's own quote there means it comes from the messages (Qwen's template writes
            // that one first and its default further on).
            const char quote = a > 0 ? tmpl[a - 1] : '\'';
            if (s.find("{{") != std::string::npos || s.find("{%") != std::string::npos || s.find(quote) != std::string::npos) continue;
            for (size_t at; (at = s.find("\\n")) != std::string::npos;) s.replace(at, 2, "\n");
            return s;
        }
    }
    return {};
}
}  // namespace

std::string_view chat_family_name(ChatFamily f) {
    for (auto [name, fam] : kFamilies)
        if (fam == f) return name;
    return "?";
}

std::optional<ChatFamily> chat_family_from_name(std::string_view name) {
    for (auto [n, fam] : kFamilies)
        if (n == name) return fam;
    return std::nullopt;
}

std::string_view chat_family_list() {
    static const std::string list = [] {
        std::string out;
        for (auto [name, fam] : kFamilies) out += (out.empty() ? "" : ", ") + std::string(name);
        return out;
    }();
    return list;
}

ChatTemplate::ChatTemplate(ChatFamily family, std::string default_system, ChatDialect dialect)
    : family_(family), dialect_(dialect), default_system_(std::move(default_system)) {}

namespace {

// The family of a template's text, and what it renders unlike the family's first template.
std::optional<std::pair<ChatFamily, ChatDialect>> detect(const std::string& tmpl) {
    auto has = [&](std::string_view s) { return tmpl.find(s) != std::string::npos; };
    ChatDialect d;
    if (has("<|im_start|>") && has("</think>")) return {{ChatFamily::Qwen3, d}};
    if (has("<|im_start|>")) return {{ChatFamily::ChatML, d}};
    if (has("<|start_header_id|>")) {
        if (has("Cutting Knowledge Date")) d.llama3 = has("strftime_now") ? ChatDialect::Llama3::DatedToday : ChatDialect::Llama3::Dated;
        return {{ChatFamily::Llama3, d}};
    }
    if (has("<start_of_turn>")) return {{ChatFamily::Gemma, d}};
    if (has("<|start|>") && has("<|channel|>")) return {{ChatFamily::Harmony, d}};
    if (has(kDsAssistant) && has(kDsUser)) {
        // V3.1 closes an empty think block unless asked to think; R1 opens one.
        d.closed_think = has("<think></think>");
        return {{has("<think>") && !d.closed_think ? ChatFamily::DeepSeekR1 : ChatFamily::DeepSeek3, d}};
    }
    if (has("'Assistant: ' + message['content'] + eos_token")) return {{ChatFamily::DeepSeek2, d}};
    if (has("<|user|>") && has("<|end|>")) return {{ChatFamily::Phi3, d}};
    if (has("<|user|>")) return {{ChatFamily::Zephyr, d}};
    if (has("[INST]")) {
        using Inst = ChatDialect::Inst;
        d.inst = has("[SYSTEM_PROMPT]")                                                ? Inst::MistralV7
                 : has("<<SYS>>")                                                     ? Inst::Llama2
                 : has("\"[INST] \"") && has("[AVAILABLE_TOOLS]")                    ? Inst::MistralV3
                 : has("' [INST] '")                                                  ? Inst::MistralV1Spaced
                 : has("[AVAILABLE_TOOLS]") || has("\"[INST]\"") || has("'[INST]'") ? Inst::MistralTekken
                                                                                      : Inst::MistralV1;
        return {{ChatFamily::Llama2, d}};
    }
    return std::nullopt;
}

}  // namespace

ChatTemplate ChatTemplate::from_gguf(const GgufFile& f, std::string_view override_name) {
    const std::string tmpl = f.get_string_opt("tokenizer.chat_template").value_or("");
    const auto detected = detect(tmpl);
    if (!override_name.empty()) {
        auto fam = chat_family_from_name(override_name);
        if (!fam)
            throw UsageError(fmt::format("unknown chat template '{}'", override_name),
                             fmt::format("choose one of: {}", chat_family_list()));
        const ChatDialect dialect = detected && detected->first == *fam ? detected->second : ChatDialect{};
        return ChatTemplate(*fam, *fam == ChatFamily::ChatML ? embedded_system_prompt(tmpl) : "", dialect);
    }
    if (detected)
        return ChatTemplate(detected->first, detected->first == ChatFamily::ChatML ? embedded_system_prompt(tmpl) : "", detected->second);
    STRATA_LOG_WARN("{}; using chatml (choose another with --chat-template)",
                    tmpl.empty() ? "the model has no chat template" : "the model's chat template is not recognised");
    return ChatTemplate(ChatFamily::ChatML);
}

namespace {

// Gemma 2 and 3: no system role (its text leads the first turn), "model" for the assistant,
// every turn's text trimmed.
std::string render_gemma(const std::vector<ChatMessage>& msgs, bool add_generation_prompt) {
    std::string out, prefix;
    for (size_t i = 0; i < msgs.size(); ++i) {
        const ChatMessage& m = msgs[i];
        if (i == 0 && m.role == "system") {
            prefix = m.content + "\n\n";
            continue;
        }
        out += fmt::format("<start_of_turn>{}\n{}{}<end_of_turn>\n", m.role == "assistant" ? "model" : m.role, prefix,
                           py_strip(m.content));
        prefix.clear();
    }
    if (add_generation_prompt) out += "<start_of_turn>model\n";
    return out;
}

// DeepSeek-V3 and R1: the system prompts first (joined by blank lines), then <｜User｜>... and
// <｜Assistant｜>...<｜end▁of▁sentence｜>, an answer's reasoning (up to its last </think>; V3.1: its
// first) left out; R1's generation prompt opens a think block, V3.1 closes an empty one after
// every header and opens no turn after an answer.
std::string render_deepseek3(const std::vector<ChatMessage>& msgs, bool add_generation_prompt, bool opens_think, bool closed_think) {
    const std::string assistant = std::string(kDsAssistant) + (closed_think ? "<think></think>" : "");
    std::string out, turns;
    for (const ChatMessage& m : msgs) {
        if (m.role == "system") {
            out += (out.empty() ? "" : "\n\n") + m.content;
        } else if (m.role == "user") {
            turns += fmt::format("{}{}", kDsUser, m.content);
        } else if (m.role == "assistant") {
            const size_t think = closed_think ? m.content.find("</think>") : m.content.rfind("</think>");
            turns += fmt::format("{}{}{}", assistant, think == std::string::npos ? m.content : m.content.substr(think + 8), kDsEnd);
        }
    }
    out += turns;
    const bool answered = closed_think && !msgs.empty() && msgs.back().role == "assistant";
    if (add_generation_prompt && !answered) out += assistant + (opens_think ? "<think>\n" : "");
    return out;
}

// Llama 2: <s>[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST] {assistant} </s>, each turn's
// text stripped.
std::string render_llama2(const std::vector<ChatMessage>& msgs) {
    std::string out, system;
    for (const auto& m : msgs) {
        if (m.role == "system") system = m.content;
        else if (m.role == "user") {
            std::string sys = system.empty() ? "" : fmt::format("<<SYS>>\n{}\n<</SYS>>\n\n", system);
            out += fmt::format("<s>[INST] {} [/INST]", py_strip(sys + m.content));
            system.clear();
        } else {
            out += fmt::format(" {} </s>", py_strip(m.content));
        }
    }
    return out;
}

// Mistral v1: Mistral-7B-Instruct v0.1's first template, <s>[INST] {user} [/INST]{assistant}</s>[INST] ...,
// or (`spaced`) the later one of 7B v0.2 and Mixtral 8x7B, <s> [INST] {user} [/INST] {assistant}</s> [INST] ...
// The system prompt leads the first user turn (the first template takes none; llama.cpp writes it so).
std::string render_mistral_v1(const std::vector<ChatMessage>& msgs, bool spaced) {
    std::string out = "<s>", system;
    for (const auto& m : msgs) {
        if (m.role == "system") system += m.content + "\n\n";
        else if (m.role == "user") {
            out += fmt::format("{}[INST] {}{} [/INST]", spaced ? " " : "", system, m.content);
            system.clear();
        } else {
            out += (spaced ? " " : "") + m.content + "</s>";
        }
    }
    return out;
}

// Llama 3.0: each turn's text trimmed.
std::string render_llama30(const std::vector<ChatMessage>& msgs, bool add_generation_prompt) {
    std::string out = "<|begin_of_text|>";
    for (const auto& m : msgs) out += fmt::format("<|start_header_id|>{}<|end_header_id|>\n\n{}<|eot_id|>", m.role, py_strip(m.content));
    if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
    return out;
}

}  // namespace

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                 std::string_view tools_json) const {
    std::string out = render_turns(messages, add_generation_prompt, tools_json);
    // Qwen3's template with enable_thinking false: the answer follows an empty think block.
    if (!thinking_ && add_generation_prompt) out += "<think>\n\n</think>\n\n";
    return out;
}

ChatTemplate ChatTemplate::without_thinking() const {
    ChatTemplate t = *this;
    t.thinking_ = !can_stop_thinking();
    return t;
}

ChatTemplate ChatTemplate::with_reasoning_effort(std::string effort) const {
    if (effort == "minimal") effort = "low";  // OpenAI's lowest level; harmony's lowest is low
    if (effort != "low" && effort != "medium" && effort != "high")
        throw UsageError(fmt::format("the reasoning effort must be minimal, low, medium or high, not '{}'", effort));
    ChatTemplate t = *this;
    t.reasoning_effort_ = std::move(effort);
    return t;
}

std::string ChatTemplate::render_turns(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                       std::string_view tools_json) const {
    if (uses_tools(messages, tools_json)) return render_with_tools(*this, messages, tools_json, add_generation_prompt);
    std::vector<ChatMessage> msgs = messages;
    if (!default_system_.empty() && (msgs.empty() || msgs.front().role != "system"))
        msgs.insert(msgs.begin(), {"system", default_system_});
    std::string out;
    switch (family_) {
        case ChatFamily::ChatML:
            for (const auto& m : msgs) out += fmt::format("<|im_start|>{}\n{}<|im_end|>\n", m.role, m.content);
            if (add_generation_prompt) out += "<|im_start|>assistant\n";
            break;
        case ChatFamily::Qwen3: return msgs.empty() ? std::string() : render_qwen3(msgs, {}, add_generation_prompt);
        case ChatFamily::Llama3:
            if (dialect_.llama3 == ChatDialect::Llama3::Plain) return render_llama30(msgs, add_generation_prompt);
            return render_llama31(msgs, {}, add_generation_prompt, llama31_date(dialect_));
        case ChatFamily::Zephyr:
            for (const auto& m : msgs) out += fmt::format("<|{}|>\n{}</s>\n", m.role, m.content);
            if (add_generation_prompt) out += "<|assistant|>\n";
            break;
        case ChatFamily::Phi3:
            // An empty system message is left out.
            for (const auto& m : msgs)
                if (m.role != "system" || !m.content.empty()) out += fmt::format("<|{}|>\n{}<|end|>\n", m.role, m.content);
            if (add_generation_prompt) out += "<|assistant|>\n";
            break;
        case ChatFamily::Gemma: return render_gemma(msgs, add_generation_prompt);
        case ChatFamily::Llama2:
            switch (dialect_.inst) {
                case ChatDialect::Inst::Llama2: return render_llama2(msgs);
                case ChatDialect::Inst::MistralV1:
                case ChatDialect::Inst::MistralV1Spaced: return render_mistral_v1(msgs, dialect_.inst == ChatDialect::Inst::MistralV1Spaced);
                case ChatDialect::Inst::MistralV3:
                case ChatDialect::Inst::MistralTekken:
                case ChatDialect::Inst::MistralV7: return render_mistral(msgs, {}, dialect_.inst);
            }
            return out;
        case ChatFamily::DeepSeek2:
            for (const auto& m : msgs) {
                if (m.role == "system") out += m.content + "\n\n";
                else if (m.role == "user") out += fmt::format("User: {}\n\n", m.content);
                else if (m.role == "assistant") out += fmt::format("Assistant: {}{}", m.content, kDsEnd);
            }
            if (add_generation_prompt) out += "Assistant:";
            break;
        case ChatFamily::DeepSeek3:
        case ChatFamily::DeepSeekR1:
            return render_deepseek3(msgs, add_generation_prompt, family_ == ChatFamily::DeepSeekR1, dialect_.closed_think);
        case ChatFamily::Harmony: return render_harmony(msgs, add_generation_prompt, reasoning_effort_);
    }
    return out;
}

std::string ChatTemplate::end_of_turn() const {
    switch (family_) {
        case ChatFamily::ChatML:
        case ChatFamily::Qwen3: return "<|im_end|>";
        case ChatFamily::Llama3: return "<|eot_id|>";
        case ChatFamily::Zephyr: return "</s>";
        case ChatFamily::Gemma: return "<end_of_turn>";
        case ChatFamily::Phi3: return "<|end|>";
        case ChatFamily::Llama2: return "</s>";
        case ChatFamily::DeepSeek2:
        case ChatFamily::DeepSeek3:
        case ChatFamily::DeepSeekR1: return std::string(kDsEnd);
        case ChatFamily::Harmony: return "<|return|>";  // <|end|> closes the reasoning too
    }
    return {};
}

}  // namespace strata::models
