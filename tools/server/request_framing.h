#pragma once
// Where one HTTP/1.1 request ends in the bytes read from a connection so far, decided the way
// cpp-httplib will parse them (lines end at '\n'; the header block ends at the first line that
// is exactly CRLF), so that the event loop hands a worker only a request it has whole.
#include <cstddef>
#include <string>
#include <string_view>

namespace strata::server {

struct RequestFrame {
    enum class State {
        Incomplete,        // more bytes needed
        Complete,          // `size` bytes are one request (a body without a length is the handler's to refuse)
        HeadersTooLarge,   // no end of the headers within the limit
        BodyTooLarge,      // Content-Length beyond the limit
        Malformed,         // a Content-Length that is not a number, or two that differ
    };
    State state = State::Incomplete;
    size_t header_bytes = 0;  // 0 until the header block has ended
    size_t size = 0;          // header_bytes + Content-Length, once the headers are in
    std::string method, path;  // from the request line (path without the query)
    bool expects_continue = false;  // "Expect: 100-continue" and the body not yet sent
};

RequestFrame frame_request(std::string_view bytes, size_t max_header_bytes, size_t max_body);

}  // namespace strata::server
