#pragma once
// Server-sent events with names ("event: TYPE\ndata: JSON\n\n" each), as the Responses API and
// Anthropic's Messages API stream them, read back for tests of their writers.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace strata::test {

struct NamedEvent {
    std::string type;
    nlohmann::ordered_json data;
};

inline std::vector<NamedEvent> parse_named_events(const std::string& text) {
    std::vector<NamedEvent> out;
    for (size_t at = 0; at < text.size();) {
        const size_t end = text.find("\n\n", at);
        REQUIRE(end != std::string::npos);
        const std::string block = text.substr(at, end - at);
        const size_t nl = block.find('\n');
        REQUIRE(block.rfind("event: ", 0) == 0);
        REQUIRE(block.compare(nl + 1, 6, "data: ") == 0);
        out.push_back({block.substr(7, nl - 7), nlohmann::ordered_json::parse(block.substr(nl + 7))});
        at = end + 2;
    }
    return out;
}

}  // namespace strata::test
