#pragma once
// A chat reply as it may be sent while it is written: its reasoning apart where the request
// sets it apart (models/chat_reasoning.h), then of the answer, with tools offered, the content
// that cannot begin a call and each call once whole (tool_stream.h); without either, the text as
// it is. What the stream sends adds up to what make_choice reads from the whole reply.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "models/chat_reasoning.h"
#include "tools/openai/request.h"
#include "tools/openai/tool_stream.h"

namespace strata::openai {

class ReplyStream {
public:
    explicit ReplyStream(const CompletionRequest& req);

    struct Delta {
        std::string reasoning;
        std::string content;
        std::vector<models::ChatToolCall> calls;  // new complete calls, with ids
        size_t first = 0;                         // the first one's position among the reply's calls
    };
    // The reply's next text; `done`: it is over (`cut`: at its length).
    Delta next(std::string_view text, bool done, bool cut);
    bool called() const { return tools_ && tools_->called(); }

private:
    std::optional<models::ReasoningSplit> reasoning_;
    std::optional<ToolCallStream> tools_;
};

}  // namespace strata::openai
