#include "tools/openai/tool_stream.h"

#include "tools/openai/response.h"

namespace strata::openai {

ToolCallStream::Delta ToolCallStream::push(std::string_view text) {
    text_ += text;
    return take(false, false);
}

ToolCallStream::Delta ToolCallStream::finish(bool cut) { return take(true, cut); }

ToolCallStream::Delta ToolCallStream::take(bool final, bool cut) {
    Delta d;
    const models::ParsedReply reply = models::parse_reply(text_, syntax_, cut);
    size_t end = 0;
    if (!reply.calls.empty()) {
        end = reply.content.size();  // the content before the calls, without its trailing spaces
        d.first = calls_sent_;
        d.calls.assign(reply.calls.begin() + static_cast<std::ptrdiff_t>(calls_sent_), reply.calls.end());
        for (auto& c : d.calls)
            if (c.id.empty()) c.id = tool_call_id(syntax_);
        calls_sent_ = reply.calls.size();
    } else if (final) {
        end = reply.content.size();  // no call came of it: content, less a call cut in its writing
    } else {
        end = models::content_end(text_, syntax_);
        while (end > content_sent_ && (text_[end - 1] == ' ' || text_[end - 1] == '\n')) --end;
    }
    if (end > content_sent_) {
        d.content = text_.substr(content_sent_, end - content_sent_);
        content_sent_ = end;
    }
    return d;
}

}  // namespace strata::openai
