#include "models/chat_template.h"

#include <array>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"
#include "models/chat_tools.h"
#include "models/gguf_file.h"

namespace strata::models {

namespace {
constexpr std::array<std::pair<std::string_view, ChatFamily>, 5> kFamilies = {{
    {"chatml", ChatFamily::ChatML},
    {"llama3", ChatFamily::Llama3},
    {"llama2", ChatFamily::Llama2},
    {"zephyr", ChatFamily::Zephyr},
    {"gemma", ChatFamily::Gemma},
}};

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

std::string_view chat_family_list() { return "chatml, llama3, llama2, zephyr, gemma"; }

ChatTemplate::ChatTemplate(ChatFamily family, std::string default_system)
    : family_(family), default_system_(std::move(default_system)) {}

ChatTemplate ChatTemplate::from_gguf(const GgufFile& f, std::string_view override_name) {
    const std::string tmpl = f.get_string_opt("tokenizer.chat_template").value_or("");
    if (!override_name.empty()) {
        auto fam = chat_family_from_name(override_name);
        if (!fam)
            throw UsageError(fmt::format("unknown chat template '{}'", override_name),
                             fmt::format("choose one of: {}", chat_family_list()));
        return ChatTemplate(*fam, *fam == ChatFamily::ChatML ? embedded_system_prompt(tmpl) : "");
    }
    auto has = [&](std::string_view s) { return tmpl.find(s) != std::string::npos; };
    if (has("<|im_start|>")) return ChatTemplate(ChatFamily::ChatML, embedded_system_prompt(tmpl));
    if (has("<|start_header_id|>")) return ChatTemplate(ChatFamily::Llama3);
    if (has("<start_of_turn>")) return ChatTemplate(ChatFamily::Gemma);
    if (has("<|user|>")) return ChatTemplate(ChatFamily::Zephyr);
    if (has("[INST]")) return ChatTemplate(ChatFamily::Llama2);
    STRATA_LOG_WARN("{}; using chatml (choose another with --chat-template)",
                    tmpl.empty() ? "the model has no chat template" : "the model's chat template is not recognised");
    return ChatTemplate(ChatFamily::ChatML);
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                 std::string_view tools_json) const {
    if (uses_tools(messages, tools_json)) return render_with_tools(family_, default_system_, messages, tools_json, add_generation_prompt);
    std::vector<ChatMessage> msgs = messages;
    if (!default_system_.empty() && (msgs.empty() || msgs.front().role != "system"))
        msgs.insert(msgs.begin(), {"system", default_system_});
    std::string out;
    switch (family_) {
        case ChatFamily::ChatML:
            for (const auto& m : msgs) out += fmt::format("<|im_start|>{}\n{}<|im_end|>\n", m.role, m.content);
            if (add_generation_prompt) out += "<|im_start|>assistant\n";
            break;
        case ChatFamily::Llama3:
            out += "<|begin_of_text|>";
            for (const auto& m : msgs)
                out += fmt::format("<|start_header_id|>{}<|end_header_id|>\n\n{}<|eot_id|>", m.role, m.content);
            if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
            break;
        case ChatFamily::Zephyr:
            for (const auto& m : msgs) out += fmt::format("<|{}|>\n{}</s>\n", m.role, m.content);
            if (add_generation_prompt) out += "<|assistant|>\n";
            break;
        case ChatFamily::Gemma:
            // Gemma has no system role: the system text leads the first user turn.
            for (size_t i = 0; i < msgs.size(); ++i) {
                const auto& m = msgs[i];
                if (m.role == "system") continue;
                std::string content = m.content;
                if (i > 0 && msgs[i - 1].role == "system") content = msgs[i - 1].content + "\n\n" + content;
                out += fmt::format("<start_of_turn>{}\n{}<end_of_turn>\n", m.role == "assistant" ? "model" : "user", content);
            }
            if (add_generation_prompt) out += "<start_of_turn>model\n";
            break;
        case ChatFamily::Llama2: {
            // <s>[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST] {assistant} </s>
            std::string system;
            for (const auto& m : msgs) {
                if (m.role == "system") system = m.content;
                else if (m.role == "user") {
                    std::string sys = system.empty() ? "" : fmt::format("<<SYS>>\n{}\n<</SYS>>\n\n", system);
                    out += fmt::format("<s>[INST] {}{} [/INST]", sys, m.content);
                    system.clear();
                } else {
                    out += fmt::format(" {} </s>", m.content);
                }
            }
            break;
        }
    }
    return out;
}

std::string ChatTemplate::end_of_turn() const {
    switch (family_) {
        case ChatFamily::ChatML: return "<|im_end|>";
        case ChatFamily::Llama3: return "<|eot_id|>";
        case ChatFamily::Zephyr: return "</s>";
        case ChatFamily::Gemma: return "<end_of_turn>";
        case ChatFamily::Llama2: return "</s>";
    }
    return {};
}

}  // namespace strata::models
