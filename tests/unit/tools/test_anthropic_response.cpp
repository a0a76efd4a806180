// Anthropic's Messages API answers: the message's content blocks, stop reason and usage, and the
// events of a stream, which start, write and stop each block and add up to the same message.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/named_events.h"
#include "tools/anthropic/response.h"

using namespace strata;
using namespace strata::anthropic;

namespace {

using Event = test::NamedEvent;
const auto parse = test::parse_named_events;

}  // namespace

TEST_CASE("anthropic answers: a reply's thinking, text and tool_use blocks, stop reason and usage", "[unit][anthropic]") {
    MessageWriter w("m", 30, 0);
    w.next("Think.", "Calling.", {{"toolu_1", "weather", "{\"city\": \"Paris\"}"}});
    w.finish("tool_use", "END", 9, 12);
    CHECK(w.message()["stop_sequence"].is_null());  // only a stop_sequence names its sequence
    const Json m = w.message();
    CHECK((m["type"] == "message" && m["role"] == "assistant" && m["model"] == "m"));
    CHECK(m["content"] == Json::parse(R"([{"type": "thinking", "thinking": "Think.", "signature": ""},
                                          {"type": "text", "text": "Calling."},
                                          {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Paris"}}])"));
    CHECK(m["stop_reason"] == "tool_use");
    CHECK(m["stop_sequence"].is_null());
    CHECK(m["usage"] == Json::parse(R"({"input_tokens": 18, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 12,
                                        "output_tokens": 9})"));

    CHECK(stop_reason("stop", "", {}) == "end_turn");
    CHECK(stop_reason("stop", "<|im_end|>", {"END"}) == "end_turn");  // the template's end of turn
    CHECK(stop_reason("stop", "END", {"END"}) == "stop_sequence");
    CHECK(stop_reason("length", "", {}) == "max_tokens");
    CHECK(stop_reason("tool_calls", "", {}) == "tool_use");
    CHECK(error_json(429, "busy") == Json::parse(R"({"type": "error", "error": {"type": "rate_limit_error", "message": "busy"}})"));
    CHECK(error_json(400, "bad")["error"]["type"] == "invalid_request_error");
}

TEST_CASE("anthropic answers: a stream's events start, write and stop each block and add up to the message", "[unit][anthropic]") {
    MessageWriter w("m", 30, 0);
    std::string text = w.start();
    text += w.next("Th", "", {});
    text += w.next("ink.", "It", {});
    text += w.next("", " is sunny.", {{"toolu_1", "f", "{\"a\": 1}"}});
    text += w.finish("stop_sequence", "END", 5, 10);
    const std::vector<Event> events = parse(text);
    std::vector<std::string> types;
    for (const Event& e : events) {
        types.push_back(e.type);
        CHECK(e.data["type"] == e.type);
    }
    CHECK(types == std::vector<std::string>{"message_start", "ping", "content_block_start", "content_block_delta", "content_block_delta",
                                            "content_block_stop", "content_block_start", "content_block_delta", "content_block_delta",
                                            "content_block_stop", "content_block_start", "content_block_delta", "content_block_stop",
                                            "message_delta", "message_stop"});
    // The blocks rebuilt from the events as a client does equal the message's.
    Json content = Json::array();
    for (const Event& e : events) {
        if (e.type == "content_block_start") content.push_back(e.data["content_block"]);
        if (e.type != "content_block_delta") continue;
        Json& block = content[e.data["index"].get<size_t>()];
        const Json& d = e.data["delta"];
        if (d["type"] == "thinking_delta") block["thinking"] = block["thinking"].get<std::string>() + d["thinking"].get<std::string>();
        if (d["type"] == "text_delta") block["text"] = block["text"].get<std::string>() + d["text"].get<std::string>();
        if (d["type"] == "input_json_delta") block["input"] = Json::parse(d["partial_json"].get<std::string>());
    }
    CHECK(content == w.message()["content"]);
    CHECK(events[0].data["message"]["content"] == Json::array());
    CHECK(events[13].data["delta"] == Json{{"stop_reason", "stop_sequence"}, {"stop_sequence", "END"}});
    // The usage as it ends: the prompt's cached part known by then.
    CHECK(events[13].data["usage"] == Json::parse(R"({"input_tokens": 20, "cache_read_input_tokens": 10, "output_tokens": 5})"));
}
