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
};

// ChatML (SmolLM2, Qwen2), Qwen3 (ChatML whose assistant turns carry <think> reasoning),
// Llama 3, Llama 2 / Mistral, Zephyr, Gemma (2 and 3), Phi-3, DeepSeek-V2 ("User: ... Assistant:"),
// DeepSeek-V3 and R1 (<｜User｜>, <｜Assistant｜>; R1's generation prompt opens its reasoning), and
// gpt-oss's harmony (<|start|>role<|message|>...<|end|>, the assistant's answer in the final channel).
enum class ChatFamily { ChatML, Qwen3, Llama3, Llama2, Zephyr, Gemma, Phi3, DeepSeek2, DeepSeek3, DeepSeekR1, Harmony };

std::string_view chat_family_name(ChatFamily f);
std::optional<ChatFamily> chat_family_from_name(std::string_view name);
std::string_view chat_family_list();

class ChatTemplate {
public:
    // Detects the family from the model's template; `override_name` wins when given.
    // Unknown templates fall back to ChatML with a warning.
    static ChatTemplate from_gguf(const GgufFile& f, std::string_view override_name = {});
    explicit ChatTemplate(ChatFamily family, std::string default_system = {});

    ChatFamily family() const { return family_; }
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

private:
    ChatFamily family_;
    std::string default_system_;  // some templates (SmolLM2) insert one when none is given
};

}  // namespace strata::models
