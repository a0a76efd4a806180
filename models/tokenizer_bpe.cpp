// Byte-level BPE (tokenizer.ggml.model = "gpt2"), as in llama.cpp's llm_tokenizer_bpe_session:
// the pre-tokenizer named by tokenizer.ggml.pre splits the text into words, each word's bytes
// are shown as GPT-2 byte characters, and the pair with the lowest merge rank (then the
// leftmost) is merged until no listed merge applies.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <optional>

#include "core/error.h"
#include "core/log.h"
#include "models/gguf_file.h"
#include "models/pair_merge.h"
#include "models/tokenizer.h"
#include "models/unicode.h"

namespace strata::models {

namespace {

using unicode::SplitRule;

struct PreTokenizer {
    std::vector<SplitRule> rules;
    bool ignore_merges = false;  // a whole word that is a token is taken as is (Llama 3)
    bool add_bos = false;        // model-type default, before tokenizer.ggml.add_bos_token
};

struct PreFamily {
    std::vector<std::string_view> names;  // not an initializer_list: its array would not outlive the table
    PreTokenizer pre;
};

// tokenizer.ggml.pre values and the regex lists llama.cpp uses for them (llama-vocab.cpp,
// llm_tokenizer_bpe). Only families whose regexes we implement are listed.
const std::vector<PreFamily>& pre_families() {
    static const std::vector<PreFamily> families = {
        {{"default", ""},
         {{SplitRule::PunctuationRuns, SplitRule::Gpt2, SplitRule::NumberRuns, SplitRule::AsciiDigits3}}},
        {{"gpt-2", "phi-2", "gigachat", "a.x-4.0", "mellum", "modern-bert", "roberta-bpe", "jina-v1-en", "mpt",
          "olmo", "jais", "trillion", "granite-docling", "exaone4"},
         {{SplitRule::Gpt2}}},
        {{"smollm", "codeshell", "exaone", "minerva-7b", "starcoder", "refact", "command-r", "mellum2"},
         {{SplitRule::EachNumber, SplitRule::Gpt2}}},
        {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano"},
         {{SplitRule::Llama3}, true, true}},
        {{"dbrx", "smaug-bpe"}, {{SplitRule::Llama3}}},
        {{"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez", "stablelm2", "hunyuan", "solar-open"},
         {{SplitRule::Qwen2}}},
        {{"deepseek-llm"},
         {{SplitRule::Newline, SplitRule::DeepseekLetters, SplitRule::DeepseekPunctuation, SplitRule::TrailingSpace,
           SplitRule::DeepseekCjk, SplitRule::NumberRuns}}},
        {{"deepseek-v3"}, {{SplitRule::Numbers3, SplitRule::CjkKana, SplitRule::DeepseekV3}}},
        {{"gpt-4o", "llama4", "kanana2", "talkie"}, {{SplitRule::Gpt4o}}},
    };
    return families;
}

const PreTokenizer& find_pre(std::string_view name) {
    for (const auto& fam : pre_families())
        if (std::find(fam.names.begin(), fam.names.end(), name) != fam.names.end()) return fam.pre;
    std::string supported;
    for (const auto& fam : pre_families())
        for (std::string_view n : fam.names)
            if (!n.empty()) supported += (supported.empty() ? "" : ", ") + std::string(n);
    throw FormatError(fmt::format("unsupported BPE pre-tokenizer tokenizer.ggml.pre = '{}'", name),
                      "supported: " + supported);
}

}  // namespace

std::span<const SplitRule> tokenizer_detail::bpe_pre_rules(std::string_view pre) { return find_pre(pre).rules; }

namespace {

class BpeTokenizer final : public Tokenizer {
public:
    BpeTokenizer(TokenizerVocab vocab, PreTokenizer pre, const std::vector<std::string>& merges)
        : Tokenizer(std::move(vocab)), pre_(std::move(pre)) {
        ranks_.reserve(merges.size());
        for (size_t i = 0; i < merges.size(); ++i) {
            // "left right", split at the first space after the first byte; the first of
            // duplicate merges keeps its rank, as with llama.cpp's map emplace.
            const std::string& m = merges[i];
            const size_t sp = m.find(' ', 1);
            if (sp == std::string::npos) continue;
            ranks_.try_emplace(m, static_cast<int32_t>(i));
        }
        build_pieces();
    }

protected:
    void encode_text(std::string_view text, bool, std::vector<int32_t>& out) const override {
        std::string word;
        for (const std::string& w : unicode::split(text, pre_.rules)) {
            word.clear();
            for (unsigned char b : w) word += unicode::byte_to_bpe_char(b);
            if (pre_.ignore_merges) {
                if (const int32_t id = v_.find(word); id >= 0) {
                    out.push_back(id);
                    continue;
                }
            }
            encode_word(word, out);
        }
    }

    std::string text_piece(int32_t id) const override {
        const std::string& t = v_.text[id];
        std::string out;
        if (v_.attr[id] & kAttrNormal) {
            for (uint32_t cpt : unicode::decode_utf8(t)) {
                const int b = unicode::bpe_char_to_byte(cpt);
                if (b >= 0) {
                    out.push_back(static_cast<char>(b));
                } else {  // not a GPT-2 byte character: llama.cpp's marker, kept byte for byte
                    std::string u;
                    unicode::append_utf8(u, cpt);
                    out += "[UNK_BYTE_0x";
                    for (unsigned char c : u) out += fmt::format("{:02x}", c);
                    out += t + "]";
                }
            }
        } else if ((v_.attr[id] & kAttrByte) && t.size() == 6) {  // <0xXX> byte fallback (Gemma 4 style)
            out.push_back(static_cast<char>(std::strtol(t.substr(3, 2).c_str(), nullptr, 16)));
        }
        return out;
    }

private:
    // The merge's rank of the pair "left right" (lower merges first), or -1 when it is not listed.
    int32_t rank(std::string_view left, std::string_view right, std::string& key) const {
        key.assign(left);
        key += ' ';
        key += right;
        auto it = ranks_.find(key);
        return it == ranks_.end() ? -1 : it->second;
    }

    void encode_word(std::string_view word, std::vector<int32_t>& out) const {
        std::string key;
        auto priority = [&](int32_t l, int32_t r, const std::vector<MergeSymbol>& sym) -> std::optional<int32_t> {
            const int32_t rk = rank(word.substr(sym[l].start, sym[l].n), word.substr(sym[r].start, sym[r].n), key);
            if (rk < 0) return std::nullopt;
            return -rk;  // the lowest rank merges first
        };
        for (const MergeSymbol& s : merge_pairs(word, priority)) {
            if (s.n == 0) continue;
            const std::string_view text = word.substr(s.start, s.n);
            if (const int32_t id = v_.find(text); id >= 0) {
                out.push_back(id);
                continue;
            }
            // Not in the vocabulary: llama.cpp looks each byte up on its own and drops misses.
            for (char c : text)
                if (const int32_t id = v_.find(std::string_view(&c, 1)); id >= 0) out.push_back(id);
        }
    }

    PreTokenizer pre_;
    std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> ranks_;
};

}  // namespace

namespace tokenizer_detail {

std::unique_ptr<Tokenizer> make_bpe_tokenizer(const GgufFile& file) {
    const std::string pre_name = file.get_string_opt("tokenizer.ggml.pre").value_or("");
    if (pre_name.empty())
        STRATA_LOG_WARN("tokenizer: no tokenizer.ggml.pre in the model file, using 'default' (as llama.cpp); "
                        "tokens may differ from the original tokenizer");
    const PreTokenizer& pre = find_pre(pre_name);
    if (!file.has("tokenizer.ggml.merges"))
        throw FormatError("BPE tokenizer without tokenizer.ggml.merges", "the model file is incomplete");
    VocabDefaults d;
    d.bos = 11, d.eos = 11;  // llama.cpp's GPT-2 defaults, used when the keys are absent
    d.add_bos = pre.add_bos;
    return std::make_unique<BpeTokenizer>(load_vocab(file, d), pre, file.get_string_array("tokenizer.ggml.merges"));
}

}  // namespace tokenizer_detail

}  // namespace strata::models
