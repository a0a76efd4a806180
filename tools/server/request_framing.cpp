#include "tools/server/request_framing.h"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace strata::server {

namespace {

bool iequals(std::string_view a, std::string_view b) {
    return a.size() == b.size() &&
           std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y)); });
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
    return s;
}

void parse_request_line(std::string_view line, RequestFrame& f) {
    line = trim(line);
    const size_t sp = line.find(' ');
    f.method = std::string(line.substr(0, sp));
    if (sp == std::string_view::npos) return;
    std::string_view target = line.substr(sp + 1);
    target = target.substr(0, target.find(' '));
    f.path = std::string(target.substr(0, target.find('?')));
}

}  // namespace

RequestFrame frame_request(std::string_view bytes, size_t max_header_bytes, size_t max_body) {
    RequestFrame f;
    size_t content_length = 0;
    bool has_length = false, expect = false;
    size_t pos = 0;
    for (bool first = true;; first = false) {
        const size_t nl = bytes.find('\n', pos);
        if (nl == std::string_view::npos || nl + 1 > max_header_bytes) {
            if (bytes.size() >= max_header_bytes) f.state = RequestFrame::State::HeadersTooLarge;
            return f;
        }
        const std::string_view line = bytes.substr(pos, nl - pos);  // without the '\n'
        pos = nl + 1;
        if (first) {
            parse_request_line(line, f);
            continue;
        }
        if (line == "\r") break;  // the blank line: the headers end here
        const size_t colon = line.find(':');
        if (colon == std::string_view::npos) continue;
        const std::string_view name = line.substr(0, colon), value = trim(line.substr(colon + 1));
        if (iequals(name, "Content-Length")) {
            size_t n = 0;
            const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
            if (ec == std::errc::result_out_of_range) n = SIZE_MAX;  // too large, whatever it says
            else if (ec != std::errc() || end != value.data() + value.size() || value.empty() || (has_length && n != content_length)) {
                f.state = RequestFrame::State::Malformed;
                return f;
            }
            content_length = n;
            has_length = true;
        } else if (iequals(name, "Expect")) {
            expect = iequals(value, "100-continue");
        }
    }
    f.header_bytes = pos;
    if (content_length > max_body) {
        f.state = RequestFrame::State::BodyTooLarge;
        return f;
    }
    f.size = pos + content_length;
    f.expects_continue = expect && bytes.size() < f.size;
    f.state = bytes.size() >= f.size ? RequestFrame::State::Complete : RequestFrame::State::Incomplete;
    return f;
}

}  // namespace strata::server
