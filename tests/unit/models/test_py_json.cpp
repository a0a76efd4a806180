#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "models/py_json.h"

using strata::models::py_json;

TEST_CASE("py_json writes what Python's json.dumps(ensure_ascii=False) writes", "[unit][chat]") {
    // The expected texts are Python 3's output for the same value (keys in insertion order).
    const auto v = nlohmann::ordered_json::parse(R"({"name": "f", "x": [1, 2.5, {"é": null, "a": true}], "e": {}, "l": [],
                                                     "s": "a\"b\\c\n\t\u0001"})");
    CHECK(py_json(v) == "{\"name\": \"f\", \"x\": [1, 2.5, {\"é\": null, \"a\": true}], \"e\": {}, \"l\": [], "
                        "\"s\": \"a\\\"b\\\\c\\n\\t\\u0001\"}");
    CHECK(py_json(v, 4) ==
          "{\n    \"name\": \"f\",\n    \"x\": [\n        1,\n        2.5,\n        {\n            \"é\": null,\n            \"a\": true\n"
          "        }\n    ],\n    \"e\": {},\n    \"l\": [],\n    \"s\": \"a\\\"b\\\\c\\n\\t\\u0001\"\n}");
    CHECK(py_json(nlohmann::ordered_json("x")) == "\"x\"");
}
