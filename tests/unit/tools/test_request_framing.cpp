// Where a request ends in the bytes read so far: the event loop hands a worker only whole
// requests, so framing must agree with HTTP/1.1 (RFC 9112: the header block ends at an empty
// CRLF line, the body is Content-Length bytes) and refuse what it cannot bound.
#include <catch2/catch.hpp>

#include <string>

#include "tools/server/request_framing.h"

using strata::server::frame_request;
using State = strata::server::RequestFrame::State;

namespace {
constexpr size_t kHeaders = 1024, kBody = 100;
}

TEST_CASE("a request is whole once its headers and Content-Length bytes are in", "[serve]") {
    const std::string head = "POST /v1/completions?x=1 HTTP/1.1\r\nHost: a\r\ncontent-length: 5\r\n\r\n";
    const std::string full = head + "hello" + "GET /health HTTP/1.1\r\n";  // a pipelined request after it
    for (size_t n = 0; n < head.size() + 5; ++n) CHECK(frame_request(full.substr(0, n), kHeaders, kBody).state == State::Incomplete);
    const auto f = frame_request(full, kHeaders, kBody);
    REQUIRE(f.state == State::Complete);
    CHECK(f.size == head.size() + 5);
    CHECK(f.header_bytes == head.size());
    CHECK(f.method == "POST");
    CHECK(f.path == "/v1/completions");
}

TEST_CASE("a request without a body ends at its empty line", "[serve]") {
    const std::string get = "GET /health HTTP/1.1\r\nHost: a\r\n\r\n";
    const auto f = frame_request(get, kHeaders, kBody);
    REQUIRE(f.state == State::Complete);
    CHECK(f.size == get.size());
    // A line ending in a bare LF is not the empty line (cpp-httplib skips it, as RFC 9112 allows).
    CHECK(frame_request("GET / HTTP/1.1\r\nHost: a\n\n", kHeaders, kBody).state == State::Incomplete);
    // A chunked body is the handler's to refuse: the request is handed over at its headers.
    CHECK(frame_request("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n", kHeaders, kBody).state == State::Complete);
}

TEST_CASE("limits and malformed lengths are refused before the body arrives", "[serve]") {
    CHECK(frame_request("POST / HTTP/1.1\r\nContent-Length: 101\r\n\r\n", kHeaders, kBody).state == State::BodyTooLarge);
    CHECK(frame_request("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n", kHeaders, kBody).state ==
          State::BodyTooLarge);
    CHECK(frame_request("POST / HTTP/1.1\r\nContent-Length: 100\r\n\r\n", kHeaders, kBody).state == State::Incomplete);
    CHECK(frame_request("POST / HTTP/1.1\r\nContent-Length: 12abc\r\n\r\n", kHeaders, kBody).state == State::Malformed);
    CHECK(frame_request("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", kHeaders, kBody).state == State::Malformed);
    CHECK(frame_request("POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", kHeaders, kBody).state ==
          State::Malformed);
    CHECK(frame_request("POST / HTTP/1.1\r\nContent-Length: 4\r\nContent-Length: 4\r\n\r\nabcd", kHeaders, kBody).state ==
          State::Complete);
    const std::string endless = "GET / HTTP/1.1\r\nX: " + std::string(kHeaders, 'a');
    CHECK(frame_request(endless, kHeaders, kBody).state == State::HeadersTooLarge);
    CHECK(frame_request(endless.substr(0, kHeaders - 1), kHeaders, kBody).state == State::Incomplete);
}

TEST_CASE("Expect: 100-continue is noted while the body is still to come", "[serve]") {
    const std::string head = "POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n";
    CHECK(frame_request(head, kHeaders, kBody).expects_continue);
    CHECK_FALSE(frame_request(head + "ok", kHeaders, kBody).expects_continue);
}
