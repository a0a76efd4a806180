// The pre-tokenizer rules of DeepSeek's ("deepseek-llm", "deepseek-v3") and GPT-4o's ("gpt-4o")
// byte-level BPE vocabularies, each regex of llama.cpp's lists (llama-vocab.cpp) as its
// std::regex runs it: a search for matches in each piece, the text between two matches a piece
// of its own (unicode.h's SplitRule gives each regex).
#include "models/split_rules.h"

namespace strata::models::unicode {

namespace {

struct Range {
    uint32_t lo, hi;
};
// The bracket expression of deepseek-llm's second regex, as code point ranges.
constexpr Range kDeepseekLetters[] = {
    {0x41, 0x5A},       {0x61, 0x7A},       {0xB5, 0xB5},       {0xC0, 0xD6},       {0xD8, 0xF6},       {0xF8, 0x1BA},
    {0x1BC, 0x1BF},     {0x1C4, 0x293},     {0x295, 0x2AF},     {0x370, 0x373},     {0x376, 0x377},     {0x37B, 0x37D},
    {0x37F, 0x37F},     {0x386, 0x386},     {0x388, 0x38A},     {0x38C, 0x38C},     {0x38E, 0x3A1},     {0x3A3, 0x3F5},
    {0x3F7, 0x481},     {0x48A, 0x52F},     {0x531, 0x556},     {0x10A0, 0x10C5},   {0x13A0, 0x13F5},   {0x13F8, 0x13FD},
    {0x1C90, 0x1CBA},   {0x1CBD, 0x1CBF},   {0x1D00, 0x1D2B},   {0x1D6B, 0x1D77},   {0x1D79, 0x1D9A},   {0x1E00, 0x1F15},
    {0x1F18, 0x1F1D},   {0x1F20, 0x1F45},   {0x1F48, 0x1F4D},   {0x1F50, 0x1F57},   {0x1F59, 0x1F59},   {0x1F5B, 0x1F5B},
    {0x1F5D, 0x1F5D},   {0x1F5F, 0x1F7D},   {0x1F80, 0x1FB4},   {0x1FB6, 0x1FBC},   {0x1FBE, 0x1FBE},   {0x1FC2, 0x1FC4},
    {0x1FC6, 0x1FCC},   {0x1FD0, 0x1FD3},   {0x1FD6, 0x1FDB},   {0x1FE0, 0x1FEC},   {0x1FF2, 0x1FF4},   {0x1FF6, 0x1FFC},
    {0x2102, 0x2102},   {0x2107, 0x2107},   {0x210A, 0x2113},   {0x2115, 0x2115},   {0x2119, 0x211D},   {0x2124, 0x2124},
    {0x2126, 0x2126},   {0x2128, 0x2128},   {0x212A, 0x212D},   {0x212F, 0x2134},   {0x2139, 0x2139},   {0x213C, 0x213F},
    {0x2145, 0x2149},   {0x214E, 0x214E},   {0x2183, 0x2184},   {0x2C00, 0x2C7B},   {0x2C7E, 0x2CE4},   {0x2CEB, 0x2CEE},
    {0x2CF2, 0x2CF3},   {0xA640, 0xA66D},   {0xA680, 0xA69B},   {0xA722, 0xA76F},   {0xA771, 0xA787},   {0xA78B, 0xA78E},
    {0xAB70, 0xABBF},   {0xFB00, 0xFB06},   {0xFB13, 0xFB17},   {0xFF21, 0xFF3A},   {0xFF41, 0xFF5A},   {0x10400, 0x1044F},
    {0x104B0, 0x104D3}, {0x104D8, 0x104FB}, {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
};
constexpr Range kDeepseekPunctuation[] = {{0x21, 0x2F},     {0x3A, 0x7E},     {0xFF01, 0xFF0F},
                                          {0xFF1A, 0xFF5E}, {0x2018, 0x201F}, {0x3000, 0x3002}};
constexpr Range kDeepseekCjk[] = {{0x4E00, 0x9FA5}, {0x800, 0x4E00}, {0xAC00, 0xD7FF}};
constexpr Range kCjkKana[] = {{0x4E00, 0x9FA5}, {0x3040, 0x309F}, {0x30A0, 0x30FF}};

template <size_t N>
bool in(const Range (&ranges)[N], uint32_t cpt) {
    // The code point std::wregex is given: non-ASCII whitespace arrives as U+000B.
    if (cpt >= 0x80 && is_ws(cpt_flags(cpt))) cpt = 0x0B;
    for (const Range& r : ranges)
        if (cpt >= r.lo && cpt <= r.hi) return true;
    return false;
}

// Classes of the collapsed text (a code point that exists; whitespace is in none of them).
bool is_num(uint16_t f) { return !is_ws(f) && is_n(f); }
bool is_letter_or_mark(uint16_t f) { return !is_ws(f) && (f & (kLetter | kMark)); }
bool is_punct_or_symbol(uint16_t f) { return !is_ws(f) && (f & (kPunctuation | kSymbol)); }
bool is_ascii_punct(uint32_t c) { return c < 0x80 && (cpt_flags(c) & (kPunctuation | kSymbol)); }
bool is_ascii_letter(uint32_t c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

template <class Pred>
size_t run(const Chunk& c, size_t pos, Pred pred, size_t max = SIZE_MAX) {
    size_t n = 0;
    while (n < max && pos + n < c.end && pred(c.cpt(pos + n), c.flags(pos + n))) ++n;
    return n;
}

// \s?[class]+ at pos.
template <size_t N>
size_t space_then_run(const Chunk& c, size_t pos, const Range (&cls)[N]) {
    auto member = [&](uint32_t x, uint16_t) { return in(cls, x); };
    if (is_ws(c.flags(pos)) && pos + 1 < c.end && in(cls, c.cpt(pos + 1))) return 1 + run(c, pos + 1, member);
    return run(c, pos, member);
}

// deepseek-v3's third regex at pos.
size_t deepseek_v3_at(const Chunk& c, size_t pos) {
    const uint32_t x = c.cpt(pos);
    const uint16_t f = c.flags(pos);
    auto ascii_letter = [](uint32_t y, uint16_t) { return is_ascii_letter(y); };
    auto letter_or_mark = [](uint32_t, uint16_t g) { return is_letter_or_mark(g); };
    auto punct = [](uint32_t, uint16_t g) { return is_punct_or_symbol(g); };
    // [ASCII punctuation][A-Za-z]+
    if (is_ascii_punct(x) && is_ascii_letter(c.cpt(pos + 1))) return 1 + run(c, pos + 1, ascii_letter);
    // [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
    const bool prefix = x != '\r' && x != '\n' && f != 0 && !is_l(f) && !is_punct_or_symbol(f);
    if (prefix && is_letter_or_mark(c.flags(pos + 1))) return 1 + run(c, pos + 1, letter_or_mark);
    if (is_letter_or_mark(f)) return run(c, pos, letter_or_mark);
    //  ?[\p{P}\p{S}]+[\r\n]*
    const size_t sp = x == ' ' && is_punct_or_symbol(c.flags(pos + 1)) ? 1 : 0;
    if (is_punct_or_symbol(c.flags(pos + sp))) {
        const size_t n = sp + run(c, pos + sp, punct);
        return n + run(c, pos + n, [](uint32_t y, uint16_t) { return y == '\r' || y == '\n'; });
    }
    return whitespace_length(c, pos, true);
}

// gpt-4o's letters from s: U*W+ else U+W*, U a letter but a-z, W a letter but A-Z (so a letter
// beyond ASCII is both), then an optional contraction; 0 when neither matches.
size_t gpt4o_letters(const Chunk& c, size_t s) {
    auto upper = [](uint32_t y, uint16_t g) { return is_l(g) && !(y >= 'a' && y <= 'z'); };
    auto lower = [](uint32_t y, uint16_t g) { return is_l(g) && !(y >= 'A' && y <= 'Z'); };
    const size_t u = s + run(c, s, upper);
    size_t end = 0;
    if (lower(c.cpt(u), c.flags(u))) {
        end = u + run(c, u, lower);
    } else {
        // U* gives letters back until W+ finds one: the last letter beyond ASCII ends the match.
        for (size_t k = u; k > s && end == 0; --k)
            if (c.cpt(k - 1) >= 0x80) end = k;
        if (end == 0) end = u;  // U+W*: W* finds nothing at u
    }
    if (end == s) return 0;
    return end - s + contraction_at(c, end);
}

size_t gpt4o_at(const Chunk& c, size_t pos) {
    const uint32_t x = c.cpt(pos);
    const uint16_t f = c.flags(pos);
    // [^\r\n\p{L}\p{N}]? then letters
    const bool prefix = x != '\r' && x != '\n' && f != 0 && !is_l(f) && !is_n(f);
    if (prefix && pos + 1 < c.end) {
        if (const size_t n = gpt4o_letters(c, pos + 1)) return 1 + n;
    }
    if (const size_t n = gpt4o_letters(c, pos)) return n;
    // \p{N}{1,3}
    if (is_num(f)) return run(c, pos, [](uint32_t, uint16_t g) { return is_num(g); }, 3);
    //  ?[^\s\p{L}\p{N}]+[\r\n/]*
    const size_t sp = x == ' ' && is_other(c.flags(pos + 1)) ? 1 : 0;
    if (is_other(c.flags(pos + sp))) {
        const size_t n = sp + run(c, pos + sp, [](uint32_t, uint16_t g) { return is_other(g); });
        return n + run(c, pos + n, [](uint32_t y, uint16_t) { return y == '\r' || y == '\n' || y == '/'; });
    }
    return whitespace_length(c, pos, true);
}

size_t match_at(const Chunk& c, SplitRule rule, size_t pos) {
    auto member = [](const auto& cls) { return [&cls](uint32_t y, uint16_t) { return in(cls, y); }; };
    switch (rule) {
        case SplitRule::Newline: return c.cpt(pos) == '\r' || c.cpt(pos) == '\n' ? 1 : 0;
        case SplitRule::DeepseekLetters: return space_then_run(c, pos, kDeepseekLetters);
        case SplitRule::DeepseekPunctuation: return space_then_run(c, pos, kDeepseekPunctuation);
        case SplitRule::TrailingSpace: {
            const size_t n = run(c, pos, [](uint32_t, uint16_t g) { return is_ws(g); });
            return pos + n == c.end ? n : 0;
        }
        case SplitRule::DeepseekCjk: return run(c, pos, member(kDeepseekCjk));
        case SplitRule::Numbers3: return run(c, pos, [](uint32_t, uint16_t g) { return is_num(g); }, 3);
        case SplitRule::CjkKana: return run(c, pos, member(kCjkKana));
        case SplitRule::DeepseekV3: return deepseek_v3_at(c, pos);
        case SplitRule::Gpt4o: return gpt4o_at(c, pos);
        default: return 0;
    }
}

}  // namespace

bool split_wide(Chunk& c, SplitRule rule) {
    if (rule < SplitRule::Newline) return false;
    for (size_t pos = c.ini; pos < c.end;) {
        const size_t n = match_at(c, rule, pos);
        if (n == 0) {
            ++pos;  // the search moves on; what it passes over stays one piece
            continue;
        }
        c.cut(pos);
        pos += n;
        c.cut(pos);
    }
    c.cut(c.end);
    return true;
}

}  // namespace strata::models::unicode
