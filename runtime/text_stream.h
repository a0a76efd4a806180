#pragma once
// Turns generated token pieces into text that is safe to show: never splits a UTF-8
// character, and holds back text that might be the start of a stop string.
#include <string>
#include <string_view>
#include <vector>

namespace strata::runtime {

class TextStream {
public:
    explicit TextStream(std::vector<std::string> stop_strings = {});
    // Appends a piece; returns the text that can be emitted now.
    std::string push(std::string_view piece);
    // Returns what is still held back (at the end of generation, when no stop string hit), less
    // the bytes of a character it does not finish.
    std::string flush();
    bool stopped() const { return stopped_; }  // a stop string was found; text ends before it
    const std::string& stop_string() const { return matched_; }  // the one found (empty while none)
    const std::string& text() const { return text_; }  // everything emitted so far

private:
    std::vector<std::string> stops_;
    std::string pending_;
    std::string text_;
    std::string matched_;
    bool stopped_ = false;
};

// Length of the longest prefix of `s` that is made of complete UTF-8 sequences.
size_t utf8_complete_prefix(std::string_view s);
// Characters of `s` (the bytes that begin a UTF-8 sequence; a sequence cut short counts where it begins).
size_t utf8_characters(std::string_view s);

}  // namespace strata::runtime
