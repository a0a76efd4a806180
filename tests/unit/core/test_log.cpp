// core/log: STRATA_LOG names the level in any case; a name that is not a level keeps warnings on.
#include <catch2/catch.hpp>

#include <cstdlib>

#include "core/log.h"

using namespace strata;

TEST_CASE("logging: STRATA_LOG sets the level, a typo leaves warnings on, -v and -vv win", "[unit][core]") {
    const spdlog::level::level_enum before = spdlog::get_level();
    auto level_with = [](const char* env, int verbosity = 0) {
        if (env) ::setenv("STRATA_LOG", env, 1);
        else ::unsetenv("STRATA_LOG");
        init_logging(verbosity);
        return spdlog::get_level();
    };
    CHECK(level_with(nullptr) == spdlog::level::warn);
    CHECK(level_with("") == spdlog::level::warn);
    CHECK(level_with("error") == spdlog::level::err);
    CHECK(level_with("DEBUG") == spdlog::level::debug);
    CHECK(level_with("off") == spdlog::level::off);
    CHECK(level_with("verbose") == spdlog::level::warn);  // not a level: not `off`, as spdlog would read it
    CHECK(level_with("error", 1) == spdlog::level::info);
    CHECK(level_with(nullptr, 2) == spdlog::level::debug);
    ::unsetenv("STRATA_LOG");
    spdlog::set_level(before);
}
