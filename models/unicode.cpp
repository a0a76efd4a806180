// Unicode helpers and hand-written pre-tokenizer splits; see unicode.h. The split functions
// follow llama.cpp's unicode.cpp step by step (its custom gpt2/llama3/qwen2 splitters and the
// std::regex fallback it uses for the small \p{N} / punctuation patterns), because a
// different but "equivalent" regex engine disagrees with it on edge cases.
#include "models/unicode.h"

#include <algorithm>
#include <array>

#include "models/split_rules.h"

namespace strata::models::unicode {

namespace {

struct CptRange {
    uint32_t first;
    uint16_t flags;
};
#include "models/unicode_tables.inc"

constexpr uint32_t kMaxCodepoint = 0x10FFFF;
constexpr uint32_t kReplacement = 0xFFFD;

bool is_continuation(uint8_t b) { return (b & 0xC0) == 0x80; }

}  // namespace

uint16_t cpt_flags(uint32_t cpt) {
    if (cpt > kMaxCodepoint) return kUndefined;
    // The last range whose first codepoint is <= cpt.
    const auto* it = std::upper_bound(std::begin(kCptRanges), std::end(kCptRanges), cpt,
                                      [](uint32_t c, const CptRange& r) { return c < r.first; });
    return (it - 1)->flags;
}

std::string_view table_version() { return STRATA_UNICODE_VERSION; }

std::vector<uint32_t> decode_utf8(std::string_view text) {
    std::vector<uint32_t> out;
    out.reserve(text.size());
    const auto* s = reinterpret_cast<const uint8_t*>(text.data());
    const size_t n = text.size();
    size_t i = 0;
    while (i < n) {
        const uint8_t b0 = s[i];
        if (b0 < 0x80) {
            out.push_back(b0);
            i += 1;
            continue;
        }
        // Same checks as llama.cpp's unicode_cpt_from_utf8: the lead byte fixes the length and
        // every following byte must be a continuation; nothing else is checked.
        uint32_t cpt = 0;
        size_t len = 0;
        if ((b0 & 0xE0) == 0xC0) {
            if (i + 1 < n && is_continuation(s[i + 1])) cpt = ((b0 & 0x1Fu) << 6) | (s[i + 1] & 0x3Fu), len = 2;
        } else if ((b0 & 0xF0) == 0xE0) {
            if (i + 2 < n && is_continuation(s[i + 1]) && is_continuation(s[i + 2]))
                cpt = ((b0 & 0x0Fu) << 12) | ((s[i + 1] & 0x3Fu) << 6) | (s[i + 2] & 0x3Fu), len = 3;
        } else if ((b0 & 0xF8) == 0xF0) {
            if (i + 3 < n && is_continuation(s[i + 1]) && is_continuation(s[i + 2]) && is_continuation(s[i + 3])) {
                cpt = ((b0 & 0x07u) << 18) | ((s[i + 1] & 0x3Fu) << 12) | ((s[i + 2] & 0x3Fu) << 6) | (s[i + 3] & 0x3Fu);
                // llama.cpp throws out of the tokenizer for these; we keep going instead.
                len = cpt <= kMaxCodepoint ? 4 : 0;
            }
        }
        if (len == 0) {
            out.push_back(kReplacement);
            i += 1;
        } else {
            out.push_back(cpt);
            i += len;
        }
    }
    return out;
}

void append_utf8(std::string& out, uint32_t cpt) {
    if (cpt <= 0x7F) {
        out.push_back(static_cast<char>(cpt));
    } else if (cpt <= 0x7FF) {
        out.push_back(static_cast<char>(0xC0 | (cpt >> 6)));
        out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
    } else if (cpt <= 0xFFFF) {
        out.push_back(static_cast<char>(0xE0 | (cpt >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
    } else if (cpt <= kMaxCodepoint) {
        out.push_back(static_cast<char>(0xF0 | (cpt >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cpt >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
    } else {
        append_utf8(out, kReplacement);
    }
}

bool is_valid_utf8(std::string_view text) {
    const auto* s = reinterpret_cast<const uint8_t*>(text.data());
    const size_t n = text.size();
    for (size_t i = 0; i < n;) {
        const size_t len = utf8_len(s[i]);
        if (len == 1) {
            if (s[i] >= 0x80) return false;
            ++i;
            continue;
        }
        if (i + len > n) return false;
        uint32_t cpt = s[i] & (0x7F >> len);
        for (size_t k = 1; k < len; ++k) {
            if (!is_continuation(s[i + k])) return false;
            cpt = (cpt << 6) | (s[i + k] & 0x3F);
        }
        static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cpt < kMin[len] || cpt > kMaxCodepoint || (cpt >= 0xD800 && cpt <= 0xDFFF)) return false;
        i += len;
    }
    return true;
}

namespace {

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes stand for themselves, the other 68
// bytes map to U+0100.. in byte order.
struct ByteMap {
    std::array<std::string, 256> to_char;
    std::array<int16_t, 512> to_byte{};
    ByteMap() {
        to_byte.fill(-1);
        auto printable = [](int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE); };
        int extra = 0;
        for (int b = 0; b < 256; ++b) {
            const uint32_t cpt = printable(b) ? b : 256 + extra++;
            append_utf8(to_char[b], cpt);
            to_byte[cpt] = static_cast<int16_t>(b);
        }
    }
};
const ByteMap& byte_map() {
    static const ByteMap m;
    return m;
}

}  // namespace

const std::string& byte_to_bpe_char(uint8_t byte) { return byte_map().to_char[byte]; }

int bpe_char_to_byte(uint32_t cpt) { return cpt < 512 ? byte_map().to_byte[cpt] : -1; }

size_t whitespace_length(const Chunk& c, size_t pos, bool newline_rule) {
    size_t n_ws = 0;
    size_t last_newline_end = 0;
    while (is_ws(c.flags(pos + n_ws))) {
        const uint32_t x = c.cpt(pos + n_ws);
        if (newline_rule && (x == '\r' || x == '\n')) last_newline_end = n_ws + 1;
        ++n_ws;
    }
    if (last_newline_end > 0) return last_newline_end;                 // \s*[\r\n]+
    if (n_ws > 1 && c.cpt(pos + n_ws) != kOutOfRange) return n_ws - 1;  // \s+(?!\S): leave one for the next word
    return n_ws;                                                       // \s+
}

bool cut_whitespace(Chunk& c, size_t& pos, bool newline_rule) {
    const size_t n = whitespace_length(c, pos, newline_rule);
    if (n == 0) return false;
    pos += n;
    c.cut(pos);
    return true;
}

size_t contraction_at(const Chunk& c, size_t pos) {
    // Only ASCII letters lower-case to these (checked by the table generator), so ASCII
    // lower-casing is exact.
    if (c.cpt(pos) != '\'' || pos + 1 >= c.end) return 0;
    const uint32_t n1 = ascii_lower(c.cpt(pos + 1));
    if (n1 == 's' || n1 == 't' || n1 == 'm' || n1 == 'd') return 2;
    if (pos + 2 >= c.end) return 0;
    const uint32_t n2 = ascii_lower(c.cpt(pos + 2));
    return (n1 == 'r' && n2 == 'e') || (n1 == 'v' && n2 == 'e') || (n1 == 'l' && n2 == 'l') ? 3 : 0;
}

namespace {

void split_gpt2(Chunk& c) {
    for (size_t pos = c.ini; pos < c.end;) {
        const uint32_t cpt = c.cpt(pos);
        // 's|'t|'re|'ve|'m|'ll|'d (case-sensitive)
        if (cpt == '\'' && pos + 1 < c.end) {
            const uint32_t n1 = c.cpt(pos + 1);
            if (n1 == 's' || n1 == 't' || n1 == 'm' || n1 == 'd') {
                pos += c.cut(pos + 2);
                continue;
            }
            if (pos + 2 < c.end) {
                const uint32_t n2 = c.cpt(pos + 2);
                if ((n1 == 'r' && n2 == 'e') || (n1 == 'v' && n2 == 'e') || (n1 == 'l' && n2 == 'l')) {
                    pos += c.cut(pos + 3);
                    continue;
                }
            }
        }
        // ' ?' then a run of letters, of numbers, or of other symbols
        uint16_t f = cpt == ' ' ? c.flags(pos + 1) : c.flags(pos);
        bool (*same)(uint16_t) = is_l(f) ? is_l : is_n(f) ? is_n : is_other(f) ? is_other : nullptr;
        if (same) {
            pos += cpt == ' ';
            while (same(f)) f = c.flags(++pos);
            c.cut(pos);
            continue;
        }
        if (cut_whitespace(c, pos, false)) continue;
        c.cut(++pos);  // no rule matched: the codepoint stands alone
    }
}

// Llama 3 (max_digits 3) and Qwen2 (max_digits 1).
void split_llama3(Chunk& c, size_t max_digits) {
    for (size_t pos = c.ini; pos < c.end;) {
        const uint32_t cpt = c.cpt(pos);
        const uint16_t flags = c.flags(pos);
        // (?i:'s|'t|'re|'ve|'m|'ll|'d)
        if (const size_t n = contraction_at(c, pos)) {
            pos += c.cut(pos + n);
            continue;
        }
        // [^\r\n\p{L}\p{N}]?\p{L}+
        if (!(cpt == '\r' || cpt == '\n' || is_n(flags)) && (is_l(flags) || is_l(c.flags(pos + 1)))) {
            ++pos;
            while (is_l(c.flags(pos))) ++pos;
            c.cut(pos);
            continue;
        }
        // \p{N}{1,max_digits}
        if (is_n(flags)) {
            size_t ini = pos;
            while (is_n(c.flags(pos))) {
                if (++pos - ini >= max_digits) {
                    c.cut(pos);
                    ini = pos;
                }
            }
            c.cut(pos);
            continue;
        }
        // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
        uint16_t f2 = cpt == ' ' ? c.flags(pos + 1) : flags;
        if (!(f2 & (kWhitespace | kLetter | kNumber)) && flags != 0) {
            pos += cpt == ' ';
            while (is_other(f2)) f2 = c.flags(++pos);
            for (uint32_t x = c.cpt(pos); x == '\r' || x == '\n'; x = c.cpt(++pos)) {
            }
            c.cut(pos);
            continue;
        }
        if (cut_whitespace(c, pos, true)) continue;
        c.cut(++pos);
    }
}

// The single-class patterns llama.cpp runs through std::regex over its "collapsed" text. In
// that text ASCII keeps its own class sets and other codepoints become one byte per category
// (whitespace first), so membership is decided as below.
bool in_class(SplitRule rule, uint32_t cpt) {
    const uint16_t f = cpt_flags(cpt);
    switch (rule) {
        case SplitRule::EachNumber:
        case SplitRule::NumberRuns: return !(f & kWhitespace) && (f & kNumber);
        case SplitRule::AsciiDigits3: return cpt >= '0' && cpt <= '9';
        case SplitRule::PunctuationRuns:
            // [\p{P}\$\+<=>\^~\|]: ASCII punctuation and symbols except '`'; beyond ASCII, \p{P}.
            if (cpt < 0x80) return cpt != '`' && (f & (kPunctuation | kSymbol));
            return !(f & kWhitespace) && (f & kPunctuation);
        default: return false;
    }
}

void split_class(Chunk& c, SplitRule rule) {
    for (size_t pos = c.ini; pos < c.end;) {
        if (!in_class(rule, c.cpts[pos])) {
            ++pos;
            continue;
        }
        size_t len = 1;  // EachNumber: one codepoint per match
        if (rule == SplitRule::NumberRuns || rule == SplitRule::PunctuationRuns) {
            while (pos + len < c.end && in_class(rule, c.cpts[pos + len])) ++len;
        } else if (rule == SplitRule::AsciiDigits3) {
            if (pos + 3 > c.end || !in_class(rule, c.cpts[pos + 1]) || !in_class(rule, c.cpts[pos + 2])) {
                ++pos;  // regex search moves on by one codepoint
                continue;
            }
            len = 3;
        }
        c.cut(pos);  // the text before the match is a piece of its own
        pos += len;
        c.cut(pos);
    }
    c.cut(c.end);
}

std::vector<size_t> apply(SplitRule rule, const std::vector<uint32_t>& cpts, const std::vector<size_t>& offsets) {
    std::vector<size_t> out;
    out.reserve(offsets.size());
    size_t start = 0;
    for (size_t len : offsets) {
        Chunk c{cpts, start, start + len, out, start};
        switch (rule) {
            case SplitRule::Gpt2: split_gpt2(c); break;
            case SplitRule::Llama3: split_llama3(c, 3); break;
            case SplitRule::Qwen2: split_llama3(c, 1); break;
            default:
                if (!split_wide(c, rule)) split_class(c, rule);
        }
        start += len;
    }
    return out;
}

}  // namespace

std::vector<std::string> split(std::string_view text, std::span<const SplitRule> rules) {
    const std::vector<uint32_t> cpts = decode_utf8(text);
    std::vector<size_t> offsets;
    if (!cpts.empty()) offsets.push_back(cpts.size());
    for (SplitRule rule : rules) offsets = apply(rule, cpts, offsets);

    std::vector<std::string> words;
    words.reserve(offsets.size());
    size_t start = 0;
    for (size_t len : offsets) {
        std::string& w = words.emplace_back();
        for (size_t i = start; i < start + len; ++i) append_utf8(w, cpts[i]);
        start += len;
    }
    return words;
}

}  // namespace strata::models::unicode
