// Tokenizer base: the vocabulary and special-token rules common to every tokenizer type, the
// split of text around special tokens, and decoding. The rules follow llama.cpp's
// llama_vocab::impl::load / tokenize / tokenizer_st_partition so that ids match it exactly.
#include "models/tokenizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "core/error.h"
#include "core/log.h"
#include "models/gguf_file.h"

namespace strata::models {

namespace tokenizer_detail {

namespace {

// GGUF tokenizer.ggml.token_type values (llama.cpp's llama_token_type) to attribute bits.
uint32_t attr_from_type(int64_t type) {
    switch (type) {
        case 1: return kAttrNormal;
        case 2: return kAttrUnknown;
        case 3: return kAttrControl;
        case 4: return kAttrUserDefined;
        case 5: return kAttrUnused;
        case 6: return kAttrByte;
        default: return kAttrUndefined;  // 0 = undefined, or a value we do not know
    }
}

template <class List>
bool contains(const List& names, std::string_view s) {
    return std::find(names.begin(), names.end(), s) != names.end();
}
bool one_of(std::string_view s, std::initializer_list<std::string_view> names) { return contains(names, s); }

// Tokens llama.cpp recognises by their text when the GGUF lacks the key. The first match in
// its token map wins; we walk an unordered_map with the same hash and insertion order, so the
// choice is the same whenever both use the same standard library.
struct AutoDetect {
    int32_t* id;
    std::vector<std::string_view> names;
};

void read_special_ids(const GgufFile& f, TokenizerVocab& v, int32_t& fim_pad, int32_t& fim_rep, int32_t& fim_sep) {
    int32_t fim_pre = -1, fim_suf = -1, fim_mid = -1;
    const std::array<std::pair<std::string_view, int32_t*>, 16> keys{{
        {"tokenizer.ggml.bos_token_id", &v.bos},          {"tokenizer.ggml.eos_token_id", &v.eos},
        {"tokenizer.ggml.eot_token_id", &v.eot},          {"tokenizer.ggml.eom_token_id", &v.eom},
        {"tokenizer.ggml.unknown_token_id", &v.unk},      {"tokenizer.ggml.seperator_token_id", &v.sep},
        {"tokenizer.ggml.padding_token_id", &v.pad},      {"tokenizer.ggml.fim_pre_token_id", &fim_pre},
        {"tokenizer.ggml.fim_suf_token_id", &fim_suf},    {"tokenizer.ggml.fim_mid_token_id", &fim_mid},
        {"tokenizer.ggml.fim_pad_token_id", &fim_pad},    {"tokenizer.ggml.fim_rep_token_id", &fim_rep},
        {"tokenizer.ggml.fim_sep_token_id", &fim_sep},    {"tokenizer.ggml.prefix_token_id", &fim_pre},
        {"tokenizer.ggml.suffix_token_id", &fim_suf},     {"tokenizer.ggml.middle_token_id", &fim_mid},
    }};
    for (const auto& [key, id] : keys) {
        if (*id >= v.n()) *id = -1;  // a model-type default beyond this vocabulary
        const GgufValue* val = f.find(key);
        if (!val || !val->is_integer()) continue;
        const int64_t x = val->as_int(key);
        // Out-of-range ids (often 0xFFFFFFFF for "none") keep the default, as in llama.cpp.
        if (x >= 0 && x < v.n()) {
            *id = static_cast<int32_t>(x);
        } else if (x != 0xFFFFFFFFll && x != -1) {
            STRATA_LOG_WARN("tokenizer: {} = {} is outside the vocabulary of {}, ignored", key, x, v.n());
        }
    }

    // Auto-detection by text, for keys the converter did not write. Each hit becomes a control token.
    const std::array<AutoDetect, 8> detect{{
        {&v.eot, {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>",
                  "_<EOT>", "[EOT]", "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>", "<end_of_utterance>"}},
        {&v.eom, {"<|eom_id|>"}},
        {&fim_pre, {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>",
                    "<PRE>", "\xe2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>"}},
        {&fim_suf, {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xef\xbd\x9c" "fim\xe2\x96\x81hole\xef\xbd\x9c>",
                    "<SUF>", "\xe2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>"}},
        {&fim_mid, {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>",
                    "<MID>", "\xe2\x96\x81<MID>", "<|code_middle|>", "<|middle|>"}},
        {&fim_pad, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"}},
        {&fim_rep, {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}},
        {&fim_sep, {"<|file_sep|>"}},
    }};
    for (const auto& [text, id] : v.to_id) {
        for (const auto& d : detect) {
            if (*d.id == -1 && contains(d.names, text)) {
                *d.id = id;
                v.attr[id] |= kAttrControl;
            }
        }
    }
}

void derive_eog(TokenizerVocab& v, int32_t fim_pad, int32_t fim_rep, int32_t fim_sep) {
    std::vector<int32_t>& eog = v.eog;
    for (int32_t id : {fim_pad, fim_rep, fim_sep})
        if (id >= 0) eog.push_back(id);
    for (const auto& [text, id] : v.to_id) {
        if (one_of(text, {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
                          "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
                          "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
                          "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>", "[e~["})) {
            eog.push_back(id);
            v.attr[id] |= kAttrControl;
        }
    }
    // gpt-oss: these are rendered like text, so llama.cpp makes them user-defined.
    for (std::string_view t : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"})
        if (int32_t id = v.find(t); id >= 0) v.attr[id] = kAttrUserDefined;
    for (int32_t id : {v.eos, v.eot, v.eom})
        if (id >= 0) eog.push_back(id);
    std::sort(eog.begin(), eog.end());
    eog.erase(std::unique(eog.begin(), eog.end()), eog.end());

    auto erase_if_present = [&](std::string_view text, uint32_t new_attr) {
        const int32_t id = v.find(text);
        auto it = std::find(eog.begin(), eog.end(), id);
        if (id >= 0 && it != eog.end()) {
            eog.erase(it);
            v.attr[id] = new_attr;
        }
    };
    auto in_eog = [&](std::string_view text) {
        const int32_t id = v.find(text);
        return id >= 0 && std::binary_search(eog.begin(), eog.end(), id);
    };
    // o200k_harmony / solar-open: "<|end|>" ends a message, not the generation.
    if (in_eog("<|end|>") && ((in_eog("<|return|>") && in_eog("<|call|>")) ||
                              ((in_eog("<|call|>") || in_eog("<|calls|>")) && in_eog("<|flush|>"))))
        erase_if_present("<|end|>", kAttrUserDefined);
    // gemma4 and plamo have an ordinary "</s>".
    if (in_eog("</s>") && (in_eog("<|tool_response>") || in_eog("<|plamo:eos|>"))) erase_if_present("</s>", kAttrNormal);
}

}  // namespace

TokenizerVocab load_vocab(const GgufFile& f, const VocabDefaults& d) {
    TokenizerVocab v;
    v.model = f.get_string("tokenizer.ggml.model");
    v.pre = f.get_string_opt("tokenizer.ggml.pre").value_or("");
    v.text = f.get_string_array("tokenizer.ggml.tokens");
    const size_t n = v.text.size();
    if (n == 0 || n > static_cast<size_t>(INT32_MAX))
        throw FormatError(fmt::format("tokenizer.ggml.tokens has {} entries", n), "the vocabulary must not be empty");

    v.score.assign(n, 0.0f);
    if (f.has("tokenizer.ggml.scores")) {
        auto s = f.get_float_array("tokenizer.ggml.scores");
        if (s.size() < n)
            throw FormatError(fmt::format("tokenizer.ggml.scores has {} entries for {} tokens", s.size(), n));
        std::copy_n(s.begin(), n, v.score.begin());
    }
    v.attr.assign(n, kAttrNormal);
    if (f.has("tokenizer.ggml.token_type")) {
        auto t = f.get_int_array("tokenizer.ggml.token_type");
        if (t.size() < n)
            throw FormatError(fmt::format("tokenizer.ggml.token_type has {} entries for {} tokens", t.size(), n));
        for (size_t i = 0; i < n; ++i) v.attr[i] = attr_from_type(t[i]);
    }
    // Filled in id order without reserve(), like llama.cpp's token_to_id, so that both maps
    // iterate in the same order (the EOT auto-detection below takes the first hit).
    for (size_t i = 0; i < n; ++i) {
        if (v.text[i].empty()) v.text[i] = fmt::format("[EMPTY_{}]", i);  // as llama.cpp, so it stays findable
        v.to_id[v.text[i]] = static_cast<int32_t>(i);                    // a duplicate text maps to its last id
    }

    v.bos = d.bos, v.eos = d.eos, v.unk = d.unk;
    v.add_bos = d.add_bos, v.add_eos = d.add_eos;
    v.add_space_prefix = f.get_bool_opt("tokenizer.ggml.add_space_prefix").value_or(d.add_space_prefix);
    int32_t fim_pad = -1, fim_rep = -1, fim_sep = -1;
    read_special_ids(f, v, fim_pad, fim_rep, fim_sep);
    v.add_bos = f.get_bool_opt("tokenizer.ggml.add_bos_token").value_or(v.add_bos);
    v.add_eos = f.get_bool_opt("tokenizer.ggml.add_eos_token").value_or(v.add_eos);
    derive_eog(v, fim_pad, fim_rep, fim_sep);

    // Special tokens are matched longest first. std::sort is not stable: we sort the same input
    // with the same comparator as llama.cpp, so ties come out in the same order.
    for (int32_t id = 0; id < v.n(); ++id)
        if (v.attr[id] & (kAttrControl | kAttrUserDefined | kAttrUnknown)) v.specials.push_back(id);
    std::sort(v.specials.begin(), v.specials.end(),
              [&](int32_t a, int32_t b) { return v.text[a].size() > v.text[b].size(); });
    return v;
}

}  // namespace tokenizer_detail

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const GgufFile& file) {
    const auto model = file.get_string_opt("tokenizer.ggml.model");
    if (!model)
        throw FormatError("the model file has no tokenizer (no tokenizer.ggml.model key)",
                          "convert the model with its tokenizer (llama.cpp convert_hf_to_gguf.py)");
    if (*model == "gpt2") return tokenizer_detail::make_bpe_tokenizer(file);
    if (*model == "llama") return tokenizer_detail::make_spm_tokenizer(file);
    throw FormatError(fmt::format("unsupported tokenizer.ggml.model '{}'", *model),
                      "supported tokenizers: gpt2 (byte-level BPE), llama (SentencePiece BPE)");
}

Tokenizer::Tokenizer(TokenizerVocab vocab) : v_(std::move(vocab)) {}
Tokenizer::~Tokenizer() = default;

void Tokenizer::build_pieces() {
    pieces_.resize(v_.text.size());
    for (int32_t id = 0; id < v_.n(); ++id) {
        // Special and user-defined tokens read as their text (llama.cpp's special=true).
        pieces_[id] = v_.attr[id] & (kAttrUnknown | kAttrControl | kAttrUserDefined) ? v_.text[id] : text_piece(id);
    }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos, bool parse_special, bool add_eos,
                                       std::span<const TextRange> literal) const {
    // The ranges are in order and apart: the first that ends past off is the only one to check.
    auto in_literal = [&](size_t off, size_t len) {
        const auto r = std::partition_point(literal.begin(), literal.end(), [&](const TextRange& x) { return x.off + x.len <= off; });
        return r != literal.end() && r->off < off + len;
    };
    // Split the text around special tokens: each special token in turn (longest first) cuts
    // every text fragment left so far at its leftmost non-overlapping occurrences.
    struct Fragment {
        int32_t id;  // -1: text
        size_t off, len;
    };
    std::vector<Fragment> frags, next;
    if (!text.empty()) frags.push_back({-1, 0, text.size()});
    for (int32_t sid : v_.specials) {
        const bool control = v_.attr[sid] & (kAttrControl | kAttrUnknown);
        if (!parse_special && control) continue;  // user-defined still match
        const std::string& tok = v_.text[sid];
        next.clear();
        for (const Fragment& fr : frags) {
            if (fr.id >= 0) {
                next.push_back(fr);
                continue;
            }
            size_t base = fr.off, from = fr.off;
            const size_t end = fr.off + fr.len;
            for (;;) {
                const size_t m = text.substr(0, end).find(tok, from);
                if (m == std::string_view::npos) break;
                if (control && in_literal(m, tok.size())) {  // text there
                    from = m + 1;
                    continue;
                }
                if (m > base) next.push_back({-1, base, m - base});
                next.push_back({sid, 0, 0});
                base = from = m + tok.size();
            }
            if (base < end) next.push_back({-1, base, end - base});
        }
        frags.swap(next);
    }

    std::vector<int32_t> out;
    out.reserve(text.size() / 3 + 2);
    if (add_bos && v_.bos >= 0) out.push_back(v_.bos);
    bool after_special = true;  // SentencePiece puts its space prefix at the start and after specials
    for (const Fragment& fr : frags) {
        if (fr.id >= 0) {
            out.push_back(fr.id);
            after_special = true;
        } else {
            encode_text(text.substr(fr.off, fr.len), after_special, out);
            after_special = false;
        }
    }
    if (add_eos && v_.eos >= 0) out.push_back(v_.eos);
    return out;
}

const std::string& Tokenizer::piece(int32_t id) const {
    static const std::string kEmpty;
    return id >= 0 && id < v_.n() ? pieces_[id] : kEmpty;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool special) const {
    std::string out;
    bool strip_space = v_.add_space_prefix;  // the space encode() added in front of the text
    for (int32_t id : ids) {
        if (id < 0 || id >= v_.n()) continue;
        const bool control = is_control(id);
        if (control && !special) continue;
        std::string_view p = pieces_[id];
        if (!control && strip_space && !p.empty()) {
            if (p.front() == ' ') p.remove_prefix(1);
            strip_space = false;
        }
        out += p;
    }
    return out;
}

bool Tokenizer::is_eog(int32_t id) const { return std::binary_search(v_.eog.begin(), v_.eog.end(), id); }

std::vector<std::string_view> Tokenizer::control_texts() const {
    std::vector<std::string_view> out;
    for (int32_t sid : v_.specials)
        if ((v_.attr[sid] & (kAttrControl | kAttrUnknown)) && !v_.text[sid].empty()) out.push_back(v_.text[sid]);
    return out;
}

bool Tokenizer::is_control(int32_t id) const {
    return id >= 0 && id < v_.n() && (v_.attr[id] & (kAttrControl | kAttrUnknown));
}

std::optional<int32_t> Tokenizer::find_token(std::string_view text) const {
    const int32_t id = v_.find(text);
    return id >= 0 ? std::optional(id) : std::nullopt;
}

const std::string& Tokenizer::token_text(int32_t id) const {
    static const std::string kEmpty;
    return id >= 0 && id < v_.n() ? v_.text[id] : kEmpty;
}

uint32_t Tokenizer::token_attr(int32_t id) const { return id >= 0 && id < v_.n() ? v_.attr[id] : kAttrUndefined; }

}  // namespace strata::models
