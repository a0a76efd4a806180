#pragma once
// A reply's reasoning apart from its answer, for the families whose models reason before they
// answer: Qwen3 (and QwQ) write a <think> block first, DeepSeek-R1's prompt opens one that the
// reply closes, gpt-oss writes its reasoning in harmony's analysis channel and its answer in the
// final one. Read as the reply is written: what a push gives back never changes (text that may
// begin a marker, and blanks that may end the reasoning, wait), and the pushes of a reply add up
// to what split_reasoning makes of it whole.
#include <optional>
#include <string>
#include <string_view>

#include "models/chat_template.h"

namespace strata::models {

enum class ReasoningStyle {
    ThinkBlock,        // "<think>reasoning</think>answer", or the answer alone
    OpenedThinkBlock,  // the prompt opened the block: "reasoning</think>answer"
    HarmonyChannels,   // "<|channel|>analysis<|message|>reasoning<|end|><|start|>assistant<|channel|>final<|message|>answer"
};

// How the template's family reasons; nullopt: its replies are answers alone.
std::optional<ReasoningStyle> reasoning_style(const ChatTemplate& t);

struct ReasoningParts {
    std::string reasoning;  // trimmed of blank lines around it
    std::string content;    // the answer, the blank lines after the reasoning left out
};

class ReasoningSplit {
public:
    explicit ReasoningSplit(ReasoningStyle style) : style_(style) {}
    // The reply's next text: the reasoning and the answer it settles.
    ReasoningParts push(std::string_view text);
    // The reply is over: what was held back.
    ReasoningParts finish();

private:
    ReasoningParts take(bool final);

    ReasoningStyle style_;
    std::string text_;
    size_t reasoning_sent_ = 0, content_sent_ = 0;
};

// A whole reply split.
ReasoningParts split_reasoning(std::string_view reply, ReasoningStyle style);

// Where the answer starts in a reply being written (after a <think> block; 0 without one), npos
// while the reply is still reasoning or may be opening a block: where a tool call may begin.
size_t answer_start(std::string_view reply, ReasoningStyle style);

// Where a reply being written stands with its reasoning, for a budget on it.
struct ReasoningOpening {
    enum class State {
        Undecided,  // the reply may still be opening it
        Open,       // begun (`at`: its first byte after the opening)
        Absent,     // the reply answers without it
    };
    State state = State::Undecided;
    size_t at = 0;
};
ReasoningOpening reasoning_opening(std::string_view reply, ReasoningStyle style);
// The marker with which the family ends its reasoning ("</think>", harmony's "<|end|>").
std::string_view reasoning_end(ReasoningStyle style);
// What closes a reasoning cut short and opens the answer, as the family writes it.
std::string_view reasoning_closer(ReasoningStyle style);

}  // namespace strata::models
