#pragma once
// Unicode helpers for the tokenizers: codepoint categories, UTF-8 decoding that never fails,
// GPT-2's byte <-> character map, and the pre-tokenizer "regexes" written by hand.
//
// Every behaviour here copies llama.cpp (src/unicode.cpp) on purpose, quirks included, because
// token ids must match it exactly: invalid UTF-8 becomes U+FFFD one byte at a time, overlong
// forms and surrogates decode as they are, and \s means Unicode White_Space.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace strata::models::unicode {

// Codepoint flag bits; the same values as llama.cpp's unicode_cpt_flags.
enum CptFlag : uint16_t {
    kUndefined = 0x001,    // unassigned (Cn) or beyond U+10FFFF
    kNumber = 0x002,       // \p{N}
    kLetter = 0x004,       // \p{L}
    kSeparator = 0x008,    // \p{Z}
    kMark = 0x010,         // \p{M}
    kPunctuation = 0x020,  // \p{P}
    kSymbol = 0x040,       // \p{S}
    kControl = 0x080,      // \p{C} other than Cn
    kWhitespace = 0x100,   // \s (White_Space property)
};

// Flags of one codepoint (kUndefined for values past U+10FFFF).
uint16_t cpt_flags(uint32_t cpt);
// The Unicode version the category table was generated from.
std::string_view table_version();

// Bytes in the UTF-8 sequence that `lead` starts (1 for continuation and invalid bytes).
inline size_t utf8_len(uint8_t lead) {
    static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return kLen[lead >> 4];
}

// Decodes UTF-8 the way llama.cpp does: a byte that does not start a complete sequence
// becomes U+FFFD and decoding resumes at the next byte. Overlong forms and surrogates are
// decoded as written. (Unlike llama.cpp, which throws on re-encoding, a 4-byte form above
// U+10FFFF is also treated as one invalid byte.)
std::vector<uint32_t> decode_utf8(std::string_view text);
// Appends the UTF-8 form of `cpt` (at most U+10FFFF; larger values append U+FFFD).
void append_utf8(std::string& out, uint32_t cpt);
// True when `text` is well-formed UTF-8 (no overlongs, surrogates or values past U+10FFFF).
bool is_valid_utf8(std::string_view text);

// GPT-2 byte-level BPE: each byte is shown as one printable character (space -> 'Ġ').
const std::string& byte_to_bpe_char(uint8_t byte);
// The byte a GPT-2 byte character stands for, or -1 when `cpt` is not one of the 256.
int bpe_char_to_byte(uint32_t cpt);

// One step of a pre-tokenizer: each is one of the regexes llama.cpp applies in turn, every
// step splitting the pieces left by the previous one (text between matches stays a piece).
enum class SplitRule {
    // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
    Gpt2,
    // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
    Llama3,
    // As Llama3 but \p{N} (one digit per piece).
    Qwen2,
    // \p{N}: every number codepoint on its own.
    EachNumber,
    // \p{N}+
    NumberRuns,
    // [0-9][0-9][0-9]
    AsciiDigits3,
    // [\p{P}\$\+<=>\^~\|]+
    PunctuationRuns,
    // The rules below run as llama.cpp runs them: those without \p{..} through std::wregex over
    // the codepoints with non-ASCII whitespace read as U+000B (so \s is White_Space and such
    // whitespace is in no other class), the others over its collapsed text (split_rules_wide.cpp).
    // "deepseek-llm" (DeepSeek-V2): [\r\n]
    Newline,
    // \s?[A-Za-zµÀ-ÖØ-ö...]+: Latin, Greek, Cyrillic, Armenian, Georgian, Cherokee ... letters
    DeepseekLetters,
    // \s?[!-/:-~！-／：-～‘-‟　-。]+
    DeepseekPunctuation,
    // \s+$
    TrailingSpace,
    // [一-龥ࠀ-一가-퟿]+
    DeepseekCjk,
    // "deepseek-v3": \p{N}{1,3}
    Numbers3,
    // [一-龥぀-ゟ゠-ヿ]+
    CjkKana,
    // [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
    DeepseekV3,
    // "gpt-4o" (o200k): llama.cpp's form of the o200k regex, whose case classes are ASCII's:
    // [^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|
    // [^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|...)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|
    // \s*[\r\n]+|\s+(?!\S)|\s+
    Gpt4o,
};

// Splits `text` with `rules` applied in order; returns the pieces as UTF-8 re-encoded from the
// decoded codepoints (so invalid bytes come back as U+FFFD), as llama.cpp does.
std::vector<std::string> split(std::string_view text, std::span<const SplitRule> rules);

}  // namespace strata::models::unicode
