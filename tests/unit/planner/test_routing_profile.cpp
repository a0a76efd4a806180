// Routing statistics saved beside a model: added to run after run, and refused for another
// file or shape.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "planner/routing_profile.h"
#include "tests/support/gguf_writer.h"

using namespace strata;
using namespace strata::planner;

TEST_CASE("routing statistics: saved beside the model, added to, and refused for another file", "[unit][planner][experts]") {
    const auto dir = test::temp_path("routing_profile");
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    const auto model = dir / "m.gguf";
    std::ofstream(model) << "x";
    RoutingProfile run;
    run.model = "m.gguf";
    run.model_bytes = 1234;
    run.tokens = 3;
    run.counts = {{1, 2, 3}, {4, 5, 6}};
    CHECK(save_routing_profile(model, run) == dir / "m.routing.json");
    save_routing_profile(model, run);
    auto loaded = load_routing_profile(model, 1234, 2, 3);
    REQUIRE(loaded);
    CHECK(loaded->tokens == 6);
    CHECK(loaded->counts == std::vector<std::vector<uint64_t>>{{2, 4, 6}, {8, 10, 12}});
    std::string why;
    CHECK_FALSE(load_routing_profile(model, 999, 2, 3, &why));
    CHECK_THAT(why, Catch::Contains("another model file"));
    CHECK_FALSE(load_routing_profile(model, 1234, 2, 4, &why));
}

TEST_CASE("routing statistics: a cache's observed hit rates are merged by size, kept and interpolated", "[unit][planner][experts]") {
    RoutingProfile r;
    CHECK_FALSE(r.observed_hit_rate(0.3));
    r.observe({0.25, 40, 100});
    r.observe({0.5, 140, 200});
    r.observe({0.252, 60, 100});  // the same size: merged (100 hits of 200)
    REQUIRE(r.cache.size() == 2);
    CHECK(r.cache[0].choices == 200);
    // Between the observed points and the ends (nothing at share 0, everything at share 1).
    CHECK(*r.observed_hit_rate(0.25) == Approx(0.5));
    CHECK(*r.observed_hit_rate(0.125) == Approx(0.25));
    CHECK(*r.observed_hit_rate(0.375) == Approx(0.6));
    CHECK(*r.observed_hit_rate(0.75) == Approx(0.85));
    // Through the file format, and refused when out of range.
    r.counts = {{1, 2}};
    const RoutingProfile back = RoutingProfile::from_json(r.to_json());
    REQUIRE(back.cache.size() == 2);
    CHECK(*back.observed_hit_rate(0.375) == Approx(0.6));
    std::string bad = r.to_json();
    bad.replace(bad.find("\"hits\":140"), 10, "\"hits\":999");
    CHECK_THROWS_WITH(RoutingProfile::from_json(bad), Catch::Contains("out of range"));
}
