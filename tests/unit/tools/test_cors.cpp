// Which pages from other origins may call the server: listed origins echoed, '*' only with a key.
#include <catch2/catch.hpp>

#include "core/error.h"
#include "tools/server/cors.h"

using namespace strata;
using strata::server::CorsPolicy;
using strata::server::allowed_headers;
using strata::server::kCorsAllowHeaders;

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

TEST_CASE("cors: the server's own page is same-origin, by the Host the request was sent to", "[unit][server]") {
    using strata::server::same_origin;
    CHECK(same_origin("http://127.0.0.1:8080", "127.0.0.1:8080"));
    CHECK(same_origin("http://LocalHost:8080", "localhost:8080"));
    CHECK_FALSE(same_origin("http://127.0.0.1:8081", "127.0.0.1:8080"));
    CHECK_FALSE(same_origin("http://evil.example", "127.0.0.1:8080"));
    CHECK_FALSE(same_origin("null", "127.0.0.1:8080"));  // a sandboxed page or a file
    CHECK_FALSE(same_origin("http://127.0.0.1:8080", ""));
}

TEST_CASE("cors: a request from a page elsewhere runs only where --cors-origin names it; the server's own page "
          "and pages on this machine always",
          "[unit][server]") {
    using strata::server::origin_may_call;
    const CorsPolicy none, listed({"https://chat.example.com"}, false);
    CHECK(origin_may_call(none, "", "127.0.0.1:8080"));  // not a browser
    CHECK(origin_may_call(none, "http://127.0.0.1:8080", "127.0.0.1:8080"));
    CHECK(origin_may_call(none, "http://localhost:3000", "127.0.0.1:8080"));  // this machine, behind a proxy of its own
    CHECK(origin_may_call(none, "http://[::1]:3000", "127.0.0.1:8080"));
    CHECK_FALSE(origin_may_call(none, "http://evil.example", "127.0.0.1:8080"));
    CHECK_FALSE(origin_may_call(none, "null", "127.0.0.1:8080"));
    CHECK_FALSE(origin_may_call(none, "http://127.0.0.1.evil.example", "127.0.0.1:8080"));
    CHECK(origin_may_call(listed, "https://chat.example.com", "127.0.0.1:8080"));
    CHECK_FALSE(origin_may_call(listed, "https://other.example.com", "127.0.0.1:8080"));
}

TEST_CASE("cors: a loopback-bound server answers only loopback host names and those allowed (DNS rebinding)",
          "[unit][server]") {
    using strata::server::host_allowed;
    for (const char* host : {"127.0.0.1:8080", "localhost:8080", "LOCALHOST", "[::1]:8080", "127.1.2.3", "app.localhost:80", ""})
        CHECK(host_allowed(host, "127.0.0.1"));
    for (const char* host : {"attacker.example:8080", "127.0.0.1.evil.example", "10.0.0.5:8080", "localhost.evil"})
        CHECK_FALSE(host_allowed(host, "127.0.0.1"));
    CHECK_FALSE(host_allowed("attacker.example", "::1"));
    CHECK_FALSE(host_allowed("attacker.example", "localhost"));
    // A proxy's public name it passes on, named with --allow-host (any port, any case).
    CHECK(host_allowed("Chat.Example.com:443", "127.0.0.1", {"chat.example.com"}));
    CHECK_FALSE(host_allowed("other.example.com", "127.0.0.1", {"chat.example.com"}));
    // Bound to every address or another one: its API key guards it, every name is answered.
    CHECK(host_allowed("attacker.example", "0.0.0.0"));
    CHECK(host_allowed("attacker.example", "192.168.1.10"));
}

TEST_CASE("cors: a preflight allows the headers an SDK asks for, those that are header names", "[unit][server]") {
    CHECK(allowed_headers("") == kCorsAllowHeaders);
    CHECK(allowed_headers("x-stainless-os, anthropic-dangerous-direct-browser-access,content-type") ==
          std::string(kCorsAllowHeaders) + ", x-stainless-os, anthropic-dangerous-direct-browser-access, content-type");
    // Not a header name: left out.
    CHECK(allowed_headers("x-ok, bad header, <script>, ") == std::string(kCorsAllowHeaders) + ", x-ok");
}
