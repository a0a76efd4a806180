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
