// The Responses API's answers: the response object's output items and usage, and the events of
// a stream, which open, write and close each item in turn and add up to the same object.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/named_events.h"
#include "tools/responses/response.h"

using namespace strata;
using namespace strata::responses;

namespace {

using Event = test::NamedEvent;
const auto parse = test::parse_named_events;

const Json kEcho = {{"tools", Json::array()}, {"tool_choice", "auto"}, {"parallel_tool_calls", true}, {"store", false}};
const Json kUsage = {{"input_tokens", 5}, {"output_tokens", 7}, {"total_tokens", 12}};

}  // namespace

TEST_CASE("responses answers: the output items of a reply with reasoning, an answer and calls", "[unit][responses]") {
    ResponseWriter w("m", kEcho);
    w.next("Think.", "Calling.", {{"call_1", "weather", "{\"city\": \"Paris\"}"}});
    w.finish(false, kUsage);
    const Json r = w.response();
    CHECK(r["object"] == "response");
    CHECK(r["status"] == "completed");
    CHECK(r["model"] == "m");
    CHECK(r["store"] == false);
    REQUIRE(r["output"].size() == 3);
    CHECK(r["output"][0]["type"] == "reasoning");
    CHECK(r["output"][0]["content"] == Json::parse(R"([{"type": "reasoning_text", "text": "Think."}])"));
    CHECK(r["output"][1]["type"] == "message");
    CHECK(r["output"][1]["status"] == "completed");
    CHECK(r["output"][1]["content"][0]["text"] == "Calling.");
    CHECK(r["output"][2]["type"] == "function_call");
    CHECK((r["output"][2]["call_id"] == "call_1" && r["output"][2]["name"] == "weather" &&
           r["output"][2]["arguments"] == "{\"city\": \"Paris\"}"));
    CHECK(r["usage"] == kUsage);

    ResponseWriter cut("m", kEcho);
    cut.next("", "Half an", {});
    cut.finish(true, kUsage);
    CHECK(cut.response()["status"] == "incomplete");
    CHECK(cut.response()["incomplete_details"] == Json{{"reason", "max_output_tokens"}});
    CHECK(cut.response()["output"][0]["status"] == "incomplete");
}

TEST_CASE("responses answers: a stream's events open, write and close each item and add up to the response", "[unit][responses]") {
    ResponseWriter w("m", kEcho);
    std::string text = w.start();
    text += w.next("Th", "", {});
    text += w.next("ink.", "It", {});
    text += w.next("", " is", {});
    text += w.next("", " sunny.", {{"call_1", "f", "{}"}});
    text += w.finish(false, kUsage);
    const std::vector<Event> events = parse(text);
    std::vector<std::string> types;
    for (size_t i = 0; i < events.size(); ++i) {
        types.push_back(events[i].type);
        CHECK(events[i].data["type"] == events[i].type);
        CHECK(events[i].data["sequence_number"] == i);
    }
    const std::vector<std::string> want = {
        "response.created", "response.in_progress",
        "response.output_item.added", "response.content_part.added", "response.reasoning_text.delta", "response.reasoning_text.delta",
        "response.reasoning_text.done", "response.content_part.done", "response.output_item.done",
        "response.output_item.added", "response.content_part.added", "response.output_text.delta", "response.output_text.delta",
        "response.output_text.delta", "response.output_text.done", "response.content_part.done", "response.output_item.done",
        "response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.done",
        "response.output_item.done", "response.completed"};
    CHECK(types == want);
    // The deltas add up to each item's text, and the last event holds the response whole.
    std::string reasoning, answer;
    for (const Event& e : events) {
        if (e.type == "response.reasoning_text.delta") reasoning += e.data["delta"].get<std::string>();
        if (e.type == "response.output_text.delta") answer += e.data["delta"].get<std::string>();
    }
    const Json r = events.back().data["response"];
    CHECK(r == w.response());
    CHECK(r["output"][0]["content"][0]["text"] == reasoning);
    CHECK(r["output"][1]["content"][0]["text"] == answer);
    CHECK(answer == "It is sunny.");
    CHECK(events[0].data["response"]["status"] == "in_progress");
    CHECK(events[0].data["response"]["id"] == r["id"]);

    ResponseWriter failed("m", kEcho);
    failed.start();
    failed.next("", "Par", {});
    const std::vector<Event> end = parse(failed.fail("server_error", "the model's output is not a number"));
    CHECK(end.back().type == "response.failed");
    CHECK(end.back().data["response"]["status"] == "failed");
    CHECK(end.back().data["response"]["error"]["message"] == "the model's output is not a number");
}
