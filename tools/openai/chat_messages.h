#pragma once
// The `messages` of a chat request as the chat template reads them: roles system (or
// developer), user, assistant (with its tool_calls) and tool (with the tool_call_id it
// answers); content as text or a list of text parts. Every malformed message is a 400 naming it.
#include <string>
#include <vector>

#include "models/chat_template.h"
#include "tools/openai/json_fields.h"

namespace strata::openai {

std::vector<models::ChatMessage> chat_messages(const Json& body);

}  // namespace strata::openai
