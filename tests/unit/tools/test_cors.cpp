// Which pages from other origins may call the server: listed origins echoed, '*' only with a key.
#include <catch2/catch.hpp>

#include "core/error.h"
#include "tools/server/cors.h"

using namespace strata;
using strata::server::CorsPolicy;

TEST_CASE("cors: listed origins are allowed, others are not", "[unit][server]") {
    const CorsPolicy none;
    CHECK_FALSE(none.enabled());
    CHECK(none.allow_origin("http://localhost:3000").empty());

    const CorsPolicy listed({"http://localhost:3000/", "https://Chat.Example.com"}, /*has_api_key=*/false);
    CHECK(listed.enabled());
    CHECK(listed.allow_origin("http://localhost:3000") == "http://localhost:3000");  // the trailing slash users paste is dropped
    CHECK(listed.allow_origin("https://chat.example.com") == "https://chat.example.com");  // hosts compare without case
    CHECK(listed.allow_origin("http://localhost:3001").empty());
    CHECK(listed.allow_origin("http://evil.example").empty());
    CHECK(listed.allow_origin("").empty());
}

TEST_CASE("cors: '*' needs an API key, and origins must be origins", "[unit][server]") {
    CHECK_THROWS_AS(CorsPolicy({"*"}, /*has_api_key=*/false), UsageError);
    const CorsPolicy any({"*"}, /*has_api_key=*/true);
    CHECK(any.allow_origin("http://anywhere.example") == "*");
    CHECK(any.allow_origin("").empty());  // not a cross-origin request
    for (const char* bad : {"localhost:3000", "http://host/path", "http://", "://host", "http://a b"})
        CHECK_THROWS_AS(CorsPolicy({bad}, true), UsageError);
}
