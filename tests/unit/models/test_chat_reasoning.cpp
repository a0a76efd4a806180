#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "models/chat_reasoning.h"

using namespace strata::models;

namespace {

// The reply pushed in pieces of `step` bytes (every split a token boundary could make), each
// piece's parts added up.
ReasoningParts streamed(const std::string& reply, ReasoningStyle style, size_t step) {
    ReasoningSplit split(style);
    ReasoningParts sum;
    auto add = [&](const ReasoningParts& d) {
        sum.reasoning += d.reasoning;
        sum.content += d.content;
    };
    for (size_t at = 0; at < reply.size(); at += step) add(split.push(std::string_view(reply).substr(at, step)));
    add(split.finish());
    return sum;
}

struct Case {
    std::string reply;
    ReasoningStyle style;
    std::string reasoning, content;
};

}  // namespace

TEST_CASE("a reply's reasoning is set apart from its answer, whole or streamed in any pieces", "[unit][chat]") {
    const std::string harmony_final = "<|start|>assistant<|channel|>final<|message|>";
    const std::vector<Case> cases = {
        // Qwen3: a think block first, blank lines around it dropped; or an answer alone, as written.
        {"<think>\nThe user greets.\n</think>\n\nHello!", ReasoningStyle::ThinkBlock, "The user greets.", "Hello!"},
        {"<think>\n\n</think>\n\nHi.", ReasoningStyle::ThinkBlock, "", "Hi."},
        {"Plain answer, <think> mentioned.", ReasoningStyle::ThinkBlock, "", "Plain answer, <think> mentioned."},
        {"  Spaced answer", ReasoningStyle::ThinkBlock, "", "  Spaced answer"},
        {"<b>bold</b>", ReasoningStyle::ThinkBlock, "", "<b>bold</b>"},
        {"<think>\ncut while reasoning  ", ReasoningStyle::ThinkBlock, "cut while reasoning", ""},
        // DeepSeek-R1: the prompt opened the block; a reply that opens it again is read the same.
        {"Two plus two.\n</think>\n\n4", ReasoningStyle::OpenedThinkBlock, "Two plus two.", "4"},
        {"<think>\nTwo plus two.\n</think>\n\n4", ReasoningStyle::OpenedThinkBlock, "Two plus two.", "4"},
        {"never closed", ReasoningStyle::OpenedThinkBlock, "never closed", ""},
        // gpt-oss: the analysis channel is the reasoning, the final channel the answer.
        {"<|channel|>analysis<|message|>Simple sum.<|end|>" + harmony_final + "4", ReasoningStyle::HarmonyChannels, "Simple sum.",
         "4"},
        {"<|channel|>final<|message|>Only an answer.", ReasoningStyle::HarmonyChannels, "", "Only an answer."},
        {"<|channel|>analysis<|message|>A.<|end|><|start|>assistant<|channel|>analysis<|message|>B.<|end|>" + harmony_final + "C",
         ReasoningStyle::HarmonyChannels, "A.\nB.", "C"},
        {"<|channel|>analysis<|message|>cut in thought", ReasoningStyle::HarmonyChannels, "cut in thought", ""},
        {"text outside the format", ReasoningStyle::HarmonyChannels, "", "text outside the format"},
    };
    for (const Case& c : cases) {
        INFO("reply: " << c.reply);
        const ReasoningParts whole = split_reasoning(c.reply, c.style);
        CHECK(whole.reasoning == c.reasoning);
        CHECK(whole.content == c.content);
        for (size_t step = 1; step <= c.reply.size(); ++step) {
            INFO("pieces of " << step << " bytes");
            const ReasoningParts s = streamed(c.reply, c.style, step);
            CHECK(s.reasoning == c.reasoning);
            CHECK(s.content == c.content);
        }
    }
}

TEST_CASE("a streamed reply holds back only what may begin a marker or end the reasoning", "[unit][chat]") {
    ReasoningSplit split(ReasoningStyle::ThinkBlock);
    CHECK(split.push("<thi").content.empty());  // may open a block
    const ReasoningParts opened = split.push("nk>\nStep one.\n</th");
    CHECK(opened.reasoning == "Step one.");  // the blank line and the close's beginning wait
    const ReasoningParts closed = split.push("ink>\n\nThe answer");
    CHECK(closed.reasoning.empty());
    CHECK(closed.content == "The answer");
    CHECK(split.push(" goes on").content == " goes on");

    ReasoningSplit answer(ReasoningStyle::ThinkBlock);
    CHECK(answer.push("No reasoning").content == "No reasoning");  // no block: the text as it comes
}

TEST_CASE("the families that reason, and Qwen3's reasoning turned off", "[unit][chat]") {
    CHECK(reasoning_style(ChatTemplate(ChatFamily::Qwen3)) == ReasoningStyle::ThinkBlock);
    CHECK(reasoning_style(ChatTemplate(ChatFamily::DeepSeekR1)) == ReasoningStyle::OpenedThinkBlock);
    CHECK(reasoning_style(ChatTemplate(ChatFamily::Harmony)) == ReasoningStyle::HarmonyChannels);
    for (ChatFamily f : {ChatFamily::ChatML, ChatFamily::Llama3, ChatFamily::DeepSeek3, ChatFamily::Gemma})
        CHECK_FALSE(reasoning_style(ChatTemplate(f)));
    const std::vector<ChatMessage> msgs = {{"user", "Hi"}};
    const ChatTemplate qwen3(ChatFamily::Qwen3);
    CHECK(qwen3.without_thinking().render(msgs) == qwen3.render(msgs) + "<think>\n\n</think>\n\n");
    CHECK(qwen3.without_thinking().render(msgs, /*add_generation_prompt=*/false) == qwen3.render(msgs, false));
    const ChatTemplate r1(ChatFamily::DeepSeekR1);
    CHECK_FALSE(r1.can_stop_thinking());
    CHECK(r1.without_thinking().render(msgs) == r1.render(msgs));
}

TEST_CASE("where a reasoning model's answer starts, for the triggers of its tool calls", "[unit][chat]") {
    constexpr size_t npos = std::string_view::npos;
    const std::string done = "<think>\nI will use <tool_call> next.\n</think>\n\n";
    CHECK(answer_start("<thi", ReasoningStyle::ThinkBlock) == npos);  // may be opening the block
    CHECK(answer_start("<think>\nI will use <tool_call>", ReasoningStyle::ThinkBlock) == npos);
    CHECK(answer_start(done + "<tool_call>", ReasoningStyle::ThinkBlock) == done.find("</think>") + 8);
    CHECK(answer_start("<tool_call>\n{", ReasoningStyle::ThinkBlock) == 0);  // no block: the answer from the start
    CHECK(answer_start("", ReasoningStyle::ThinkBlock) == 0);
    CHECK(answer_start("Still thinking", ReasoningStyle::OpenedThinkBlock) == npos);  // the prompt opened it
    CHECK(answer_start("Done.</think>\n4", ReasoningStyle::OpenedThinkBlock) == 13);
}
