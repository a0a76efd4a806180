// Integer fields of the planner's JSON documents (plans, hardware profiles): only whole
// numbers that fit the field's type are read, never a cast that overflows.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "planner/json_util.h"
#include "planner/plan.h"

using namespace strata;
using namespace strata::planner;
using json_util::fits_integer;
using json_util::json;

TEST_CASE("fits_integer accepts exactly the numbers the type holds", "[unit][planner]") {
    CHECK(fits_integer<int32_t>(json(2147483647)));
    CHECK_FALSE(fits_integer<int32_t>(json(2147483648LL)));
    CHECK(fits_integer<int32_t>(json(-2147483648LL)));
    CHECK_FALSE(fits_integer<int32_t>(json(-2147483649LL)));
    CHECK(fits_integer<int32_t>(json::parse("5.0")));
    CHECK_FALSE(fits_integer<int32_t>(json::parse("5.5")));
    CHECK_FALSE(fits_integer<int32_t>(json::parse("1222748851814.4")));
    CHECK_FALSE(fits_integer<int32_t>(json::parse("2147483648.0")));
    CHECK(fits_integer<int32_t>(json::parse("-2147483648.0")));
    CHECK_FALSE(fits_integer<uint64_t>(json(-1)));
    CHECK(fits_integer<uint64_t>(json(18446744073709551615ULL)));
    CHECK_FALSE(fits_integer<uint64_t>(json::parse("18446744073709551616.0")));  // 2^64
    CHECK_FALSE(fits_integer<int64_t>(json::parse("9223372036854775808.0")));    // 2^63
    CHECK(fits_integer<int>(json("text")));  // not a number: get<T>() reports the type
}

TEST_CASE("integer plan fields out of range are refused, naming the field", "[unit][planner]") {
    auto field_error = [](const std::string& text) -> std::string {
        try {
            Plan::from_json(text);
        } catch (const UsageError& e) {
            return e.what();
        }
        return "accepted";
    };
    // Found by tests/fuzz/fuzz_plan: a float beyond int32 in workload.gen_len was cast to int.
    const auto path = std::filesystem::path(STRATA_SOURCE_DIR) / "tests/fuzz/regressions/plan/gen_len_float_beyond_int32.json";
    std::ifstream in(path);
    REQUIRE(in);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string crash = ss.str();
    CHECK_THAT(field_error(crash), Catch::Contains("gen_len") && Catch::Contains("not a whole number"));

    const std::string with_n_layer = "{\"strata_plan\": 1, \"model\": {\"name\": \"m\", \"n_layer\": 1e10}}";
    CHECK_THAT(field_error(with_n_layer), Catch::Contains("n_layer") && Catch::Contains("not a whole number"));
    const std::string negative_bytes = "{\"strata_plan\": 1, \"model\": {\"name\": \"m\", \"n_layer\": 2, \"weight_bytes\": -5}}";
    CHECK_THAT(field_error(negative_bytes), Catch::Contains("weight_bytes"));
}
