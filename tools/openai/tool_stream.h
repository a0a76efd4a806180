#pragma once
// A chat reply streamed while tools are offered: its content is sent as soon as it cannot be
// the start of a call (text that may begin the family's trigger, and spaces before it, wait),
// and each call once its JSON is complete. What the stream sends adds up to what
// make_choice reads from the whole reply.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "models/chat_tools.h"

namespace strata::openai {

class ToolCallStream {
public:
    explicit ToolCallStream(models::ToolCallSyntax syntax) : syntax_(std::move(syntax)) {}

    struct Delta {
        std::string content;
        std::vector<models::ChatToolCall> calls;  // new complete calls, with ids
        size_t first = 0;                         // the first one's position among the reply's calls
    };
    // The reply's next text.
    Delta push(std::string_view text);
    // The reply is over: what was held back (`cut`: at its length, which drops a call unfinished).
    Delta finish(bool cut);
    bool called() const { return calls_sent_ > 0; }

private:
    Delta take(bool final, bool cut);

    models::ToolCallSyntax syntax_;
    std::string text_;
    size_t content_sent_ = 0, calls_sent_ = 0;
};

}  // namespace strata::openai
