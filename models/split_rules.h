#pragma once
// Internal to models/: the piece of text a pre-tokenizer rule splits, the codepoint tests the
// rules share, and the rules written in split_rules_wide.cpp (DeepSeek's and GPT-4o's), which
// unicode.cpp's split() applies beside its own.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "models/unicode.h"

namespace strata::models::unicode {

inline constexpr uint32_t kOutOfRange = 0xFFFFFFFF;  // "no codepoint here": past the end of a chunk

// One chunk of codepoints being split: positions outside [ini, end) read as "nothing".
struct Chunk {
    const std::vector<uint32_t>& cpts;
    size_t ini, end;
    std::vector<size_t>& out;  // lengths of the pieces produced
    size_t prev_end;

    uint32_t cpt(size_t pos) const { return pos >= ini && pos < end ? cpts[pos] : kOutOfRange; }
    uint16_t flags(size_t pos) const { return pos >= ini && pos < end ? cpt_flags(cpts[pos]) : 0; }
    // Ends the current piece at `pos`; returns its length (0: nothing emitted).
    size_t cut(size_t pos) {
        const size_t len = pos - prev_end;
        if (len > 0) out.push_back(len);
        prev_end = pos;
        return len;
    }
};

inline bool is_l(uint16_t f) { return f & kLetter; }
inline bool is_n(uint16_t f) { return f & kNumber; }
inline bool is_ws(uint16_t f) { return f & kWhitespace; }
// [^\s\p{L}\p{N}] for a codepoint that exists (flags 0 means past the chunk end).
inline bool is_other(uint16_t f) { return f != 0 && !(f & (kWhitespace | kLetter | kNumber)); }
inline uint32_t ascii_lower(uint32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

// The length of \s*[\r\n]+ (newline_rule), else \s+(?!\S), else \s+ at pos (0: pos is not whitespace).
size_t whitespace_length(const Chunk& c, size_t pos, bool newline_rule);
// The same match cut as a piece, pos moved past it; false when pos is not whitespace.
bool cut_whitespace(Chunk& c, size_t& pos, bool newline_rule);
// The length of (?i:'s|'t|'re|'ve|'m|'ll|'d) at pos (0: none).
size_t contraction_at(const Chunk& c, size_t pos);

// split_rules_wide.cpp: the rules of the "deepseek-llm", "deepseek-v3" and "gpt-4o" pre-tokenizers
// (SplitRule::Newline .. SplitRule::Gpt4o); false for a rule that is not one of them.
bool split_wide(Chunk& c, SplitRule rule);

}  // namespace strata::models::unicode
