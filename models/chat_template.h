#pragma once
// Chat templates: the prompt format an instruct model was trained on. The family is
// detected from the GGUF `tokenizer.chat_template` text; rendering is native C++ (no Jinja).
// A conversation with tools (offered, called or answered) is rendered in its family's tool
// format (models/chat_tools.cpp).
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace strata::models {

class GgufFile;

// A call an assistant message made.
struct ChatToolCall {
    std::string id;
    std::string name;
    std::string arguments;  // JSON text
};

struct ChatMessage {
    std::string role;  // "system", "user", "assistant", "tool"
    std::string content;
    std::vector<ChatToolCall> tool_calls = {};  // an assistant's calls
    std::string tool_call_id = {};              // a tool message: the call it answers
    std::string reasoning = {};                 // an assistant's reasoning given apart (reasoning_content); else in its content
};

// ChatML (SmolLM2, Qwen2), Qwen3 (ChatML whose assistant turns carry <think> reasoning),
// Llama 3, Llama 2 / Mistral ([INST]), Zephyr, Gemma (2 and 3), Phi-3, DeepSeek-V2 ("User: ... Assistant:"),
// DeepSeek-V3 and R1 (<｜User｜>, <｜Assistant｜>; R1's generation prompt opens its reasoning), and
// gpt-oss's harmony (<|start|>role<|message|>...<|end|>, the assistant's answer in the final channel).
enum class ChatFamily { ChatML, Qwen3, Llama3, Llama2, Zephyr, Gemma, Phi3, DeepSeek2, DeepSeek3, DeepSeekR1, Harmony };

// What the templates of one family differ in, read from the model's own template text.
struct ChatDialect {
    // Llama 3.1 and later open every conversation with a system turn holding the knowledge
    // cutoff and a date: 3.2's is today's (its template reads the clock), 3.1's and 3.3's their
    // default, 26 Jul 2024. Llama 3.0 has no such turn. Every Llama 3 template trims the text.
    enum class Llama3 { Plain, Dated, DatedToday } llama3 = Llama3::Plain;
    // [INST] templates: Llama 2's (a <<SYS>> block in the first turn, text stripped); Mistral's
    // v1 ("[INST] text [/INST]answer</s>", the system prompt in the first turn; the later v1
    // templates of 7B v0.2 and Mixtral 8x7B " [INST] text [/INST] answer</s>"), v3 (7B v0.3:
    // "[INST] text[/INST] answer</s>", the answer trimmed), tekken (Nemo: "[INST]text[/INST]answer</s>")
    // (v3 and tekken: the system prompt in the last user turn) and v7 (Small 3: tekken's turns,
    // system messages as [SYSTEM_PROMPT] turns of their own).
    enum class Inst { Llama2, MistralV1, MistralV1Spaced, MistralV3, MistralTekken, MistralV7 } inst = Inst::Llama2;
    // DeepSeek-V3.1: every assistant header followed by an empty <think></think> (thinking off).
    bool closed_think = false;
};

std::string_view chat_family_name(ChatFamily f);
std::optional<ChatFamily> chat_family_from_name(std::string_view name);
std::string_view chat_family_list();

class ChatTemplate {
public:
    // Detects the family and its dialect from the model's template; `override_name` wins when
    // given (with the template's dialect where it is of that family). Unknown templates fall
    // back to ChatML with a warning.
    static ChatTemplate from_gguf(const GgufFile& f, std::string_view override_name = {});
    explicit ChatTemplate(ChatFamily family, std::string default_system = {}, ChatDialect dialect = {});

    ChatFamily family() const { return family_; }
    const ChatDialect& dialect() const { return dialect_; }
    // The prompt for `messages`, ending with the assistant's turn opened when add_generation_prompt.
    // `tools_json`: the tools offered, a JSON array of OpenAI tool objects (empty: none).
    // Throws UsageError for tools in a family without a tool format, or a conversation its
    // template refuses.
    std::string render(const std::vector<ChatMessage>& messages, bool add_generation_prompt = true,
                       std::string_view tools_json = {}) const;
    // The model's own system prompt, used when a conversation has none (empty: none).
    const std::string& default_system() const { return default_system_; }
    // Text that ends an assistant turn (used as a stop string next to EOS).
    std::string end_of_turn() const;
    // Whether the model's reasoning can be turned off (Qwen3: its template's enable_thinking), and
    // the same template with it off: the generation prompt closes an empty think block.
    bool can_stop_thinking() const { return family_ == ChatFamily::Qwen3; }
    ChatTemplate without_thinking() const;
    // The same template asking for `effort` ("low", "medium", "high"; OpenAI's "minimal" is
    // low) of reasoning where its family has levels (harmony's system message); others are
    // unchanged. Throws UsageError for another level.
    ChatTemplate with_reasoning_effort(std::string effort) const;

private:
    std::string render_turns(const std::vector<ChatMessage>& messages, bool add_generation_prompt, std::string_view tools_json) const;

    ChatFamily family_;
    ChatDialect dialect_;
    std::string default_system_;  // some templates (SmolLM2) insert one when none is given
    bool thinking_ = true;
    std::string reasoning_effort_ = "medium";
};

}  // namespace strata::models
