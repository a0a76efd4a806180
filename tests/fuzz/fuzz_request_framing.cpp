// HTTP request framing of `strata serve`'s event loop (frame_request) on arbitrary bytes:
// never a crash; a whole request lies within the bytes and the limits; framing is decided by
// the request's own bytes (what follows it, a pipelined request, changes nothing); and a
// request refused as too large or malformed stays refused whatever arrives after it.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "tools/server/request_framing.h"

namespace {

using strata::server::frame_request;
using State = strata::server::RequestFrame::State;

void require(bool ok) {
    if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 2) return 0;
    // The first two bytes choose the limits, so that both are reached by short inputs.
    const size_t max_header = 16 + data[0] * 4, max_body = data[1];
    const std::string_view bytes(reinterpret_cast<const char*>(data) + 2, size - 2);
    const auto f = frame_request(bytes, max_header, max_body);
    if (f.state == State::Complete) {
        require(f.header_bytes > 0 && f.header_bytes <= f.size && f.size <= bytes.size());
        require(f.header_bytes <= max_header && f.size - f.header_bytes <= max_body);
        const auto alone = frame_request(bytes.substr(0, f.size), max_header, max_body);
        require(alone.state == State::Complete && alone.size == f.size && alone.method == f.method && alone.path == f.path);
    }
    if (f.state == State::Incomplete) require(bytes.size() < max_header || f.header_bytes > 0);
    if (f.state == State::BodyTooLarge || f.state == State::Malformed) {
        const auto more = frame_request(std::string(bytes) + "0\r\n\r\n", max_header, max_body);
        require(more.state == f.state);
    }
    return 0;
}
