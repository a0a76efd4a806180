#include "runtime/text_stream.h"

#include <algorithm>

namespace strata::runtime {

size_t utf8_complete_prefix(std::string_view s) {
    // Look back at most 3 bytes for the lead byte of an unfinished sequence.
    const size_t n = s.size();
    for (size_t back = 1; back <= std::min<size_t>(n, 4); ++back) {
        const auto c = static_cast<unsigned char>(s[n - back]);
        if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
        size_t need = (c & 0x80) == 0 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
        return back < need ? n - back : n;
    }
    return n;  // only continuation bytes: invalid, pass them through rather than stall
}

TextStream::TextStream(std::vector<std::string> stop_strings) : stops_(std::move(stop_strings)) {
    std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

std::string TextStream::push(std::string_view piece) {
    if (stopped_) return {};
    pending_ += piece;
    // The stop string that the text reaches first ends it (a piece may hold two).
    size_t first = std::string::npos;
    for (const auto& stop : stops_)
        if (const size_t at = pending_.find(stop); at < first) first = at, matched_ = stop;
    if (first != std::string::npos) {
        pending_.resize(first);
        stopped_ = true;
        return flush();
    }
    // Hold back the longest tail that is a proper prefix of some stop string.
    size_t hold = 0;
    for (const auto& stop : stops_)
        for (size_t len = std::min(stop.size() - 1, pending_.size()); len > hold; --len)
            if (pending_.compare(pending_.size() - len, len, stop, 0, len) == 0) {
                hold = len;
                break;
            }
    size_t emit = utf8_complete_prefix(std::string_view(pending_).substr(0, pending_.size() - hold));
    std::string out = pending_.substr(0, emit);
    pending_.erase(0, emit);
    text_ += out;
    return out;
}

std::string TextStream::flush() {
    std::string out;
    out.swap(pending_);
    // A character the last token began and no token finished (the reply cut at its length) is
    // dropped, not shown as U+FFFD.
    out.resize(utf8_complete_prefix(out));
    text_ += out;
    return out;
}

size_t utf8_characters(std::string_view s) {
    size_t n = 0;
    for (const char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    return n;
}

}  // namespace strata::runtime
