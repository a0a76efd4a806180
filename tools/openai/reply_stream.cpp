#include "tools/openai/reply_stream.h"

namespace strata::openai {

ReplyStream::ReplyStream(const CompletionRequest& req) {
    if (req.reasoning) reasoning_.emplace(*req.reasoning);
    if (req.tools) tools_.emplace(*req.tools);
}

ReplyStream::Delta ReplyStream::next(std::string_view text, bool done, bool cut) {
    Delta d;
    std::string answer(text);
    if (reasoning_) {
        models::ReasoningParts parts = reasoning_->push(text);
        if (done) {
            models::ReasoningParts rest = reasoning_->finish();
            parts.reasoning += rest.reasoning;
            parts.content += rest.content;
        }
        d.reasoning = std::move(parts.reasoning);
        answer = std::move(parts.content);
    }
    if (!tools_) {
        d.content = std::move(answer);
        return d;
    }
    ToolCallStream::Delta t = tools_->push(answer);
    if (done) {
        ToolCallStream::Delta rest = tools_->finish(cut);
        t.content += rest.content;
        if (t.calls.empty()) t.first = rest.first;
        t.calls.insert(t.calls.end(), rest.calls.begin(), rest.calls.end());
    }
    d.content = std::move(t.content);
    d.calls = std::move(t.calls);
    d.first = t.first;
    return d;
}

}  // namespace strata::openai
