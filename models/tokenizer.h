#pragma once
// Text <-> token ids, built from the vocabulary inside a GGUF file. The ids match llama.cpp's
// llama_tokenize() for the same file and flags, id for id (tests/fixtures/tokenizer_ids_*.jsonl):
// special-token splitting, SentencePiece space handling and byte-level BPE pre-tokenizers all
// copy its rules, quirks included.
//
// Supported `tokenizer.ggml.model` values: "gpt2" (byte-level BPE, tokenizer_bpe.cpp) and
// "llama" (SentencePiece BPE by score, tokenizer_spm.cpp).
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "models/unicode.h"

namespace strata::models {

class GgufFile;

// Per-token attribute bits; the values of llama.cpp's llama_token_attr.
enum TokenAttr : uint32_t {
    kAttrUndefined = 0,
    kAttrUnknown = 1u << 0,      // <unk>
    kAttrUnused = 1u << 1,
    kAttrNormal = 1u << 2,
    kAttrControl = 1u << 3,      // <s>, <|im_start|>: never produced from plain text
    kAttrUserDefined = 1u << 4,  // added tokens matched in text even without parse_special
    kAttrByte = 1u << 5,         // SentencePiece <0xXX> byte fallback
};

// Hash for string-keyed maps that also accepts string_view lookups without a copy.
struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

// The vocabulary and special-token rules read from GGUF, shared by every tokenizer type.
struct TokenizerVocab {
    std::string model;  // tokenizer.ggml.model
    std::string pre;    // tokenizer.ggml.pre (BPE only)
    std::vector<std::string> text;
    std::vector<float> score;
    std::vector<uint32_t> attr;  // TokenAttr bits
    std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> to_id;

    int32_t bos = -1, eos = -1, eot = -1, eom = -1, unk = -1, sep = -1, pad = -1;
    bool add_bos = false, add_eos = false, add_space_prefix = false;
    std::vector<int32_t> eog;          // end-of-generation ids, sorted
    std::vector<int32_t> specials;     // ids matched inside text, longest text first

    int32_t n() const { return static_cast<int32_t>(text.size()); }
    int32_t find(std::string_view s) const {
        auto it = to_id.find(s);
        return it == to_id.end() ? -1 : it->second;
    }
};

// A byte range of the text given to Tokenizer::encode.
struct TextRange {
    size_t off = 0, len = 0;
};

class Tokenizer {
public:
    // Throws FormatError for a missing or unsupported tokenizer (naming the supported ones).
    static std::unique_ptr<Tokenizer> from_gguf(const GgufFile& file);
    virtual ~Tokenizer();

    // Text to ids. `add_bos` prepends BOS and `add_eos` appends EOS when the model has them;
    // pass add_bos_default() / add_eos_default() for the model's own rule (what llama.cpp's
    // add_special=true does). With `parse_special`, control tokens written in the text
    // ("<|im_start|>", "<s>") become their ids; user-defined tokens are always matched. Within
    // the `literal` ranges (in order, apart) control tokens are read as text even with
    // `parse_special` (a chat message that writes "<|im_end|>" does not end its turn).
    std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special, bool add_eos = false,
                                std::span<const TextRange> literal = {}) const;
    // The texts encode() with parse_special reads as control or unknown tokens.
    std::vector<std::string_view> control_texts() const;

    // The bytes one token stands for: byte tokens decoded, SentencePiece '▁' as ' ', control
    // tokens as their text. May be part of a UTF-8 character; empty for ids out of range.
    const std::string& piece(int32_t id) const;
    // Ids to text. Control and unknown tokens are left out unless `special`. For SentencePiece
    // models the space encode() puts in front of the text is removed again, so that
    // decode(encode(s, ...)) == s for valid UTF-8 (with parse_special false).
    std::string decode(std::span<const int32_t> ids, bool special = false) const;

    bool is_eog(int32_t id) const;
    // Control or unknown: a token that is not text.
    bool is_control(int32_t id) const;
    int32_t bos() const { return v_.bos; }  // -1 when the model has none
    int32_t eos() const { return v_.eos; }
    int32_t eot() const { return v_.eot; }
    int32_t unk() const { return v_.unk; }
    int32_t pad() const { return v_.pad; }
    std::span<const int32_t> eog_ids() const { return v_.eog; }
    int32_t n_vocab() const { return v_.n(); }
    bool add_bos_default() const { return v_.add_bos && v_.bos >= 0; }
    bool add_eos_default() const { return v_.add_eos && v_.eos >= 0; }
    // The id whose vocabulary text is exactly `text` ("<|im_end|>", "▁the").
    std::optional<int32_t> find_token(std::string_view text) const;
    // The raw vocabulary entry (GPT-2 byte characters and '▁' not decoded); empty if out of range.
    const std::string& token_text(int32_t id) const;
    uint32_t token_attr(int32_t id) const;
    const std::string& model() const { return v_.model; }
    const std::string& pre() const { return v_.pre; }

protected:
    explicit Tokenizer(TokenizerVocab vocab);
    // Tokenizes a run of text that holds no special token, appending to `out`. `after_special`
    // is true at the start of the text and right after a special token.
    virtual void encode_text(std::string_view text, bool after_special, std::vector<int32_t>& out) const = 0;
    // The piece of a normal, byte or undefined token.
    virtual std::string text_piece(int32_t id) const = 0;
    // Fills the piece cache; derived constructors call it last (it uses text_piece()).
    void build_pieces();

    TokenizerVocab v_;

private:
    std::vector<std::string> pieces_;
};

namespace tokenizer_detail {
// Model-type defaults applied before the GGUF keys, as llama.cpp's llama_vocab::load does.
struct VocabDefaults {
    int32_t bos = -1, eos = -1, unk = -1;
    bool add_bos = false, add_eos = false, add_space_prefix = false;
};
// Reads tokens, scores, types, special ids and flags, then derives EOT/EOG and the specials.
TokenizerVocab load_vocab(const GgufFile& file, const VocabDefaults& defaults);
std::unique_ptr<Tokenizer> make_bpe_tokenizer(const GgufFile& file);  // tokenizer_bpe.cpp
// The splitting rules of a BPE pre-tokenizer (tokenizer.ggml.pre); throws FormatError naming the
// supported ones for another name (tokenizer_bpe.cpp).
std::span<const unicode::SplitRule> bpe_pre_rules(std::string_view pre);
std::unique_ptr<Tokenizer> make_spm_tokenizer(const GgufFile& file);  // tokenizer_spm.cpp
}  // namespace tokenizer_detail

}  // namespace strata::models
