// SentencePiece BPE (tokenizer.ggml.model = "llama"), as in llama.cpp's llm_tokenizer_spm_session:
// spaces become '▁' (with one added in front of the text and after each special token when
// add_space_prefix), characters are merged pairwise by the highest score of the token they
// form (then the leftmost pair), and whatever is left that is not a token falls back to
// <0xXX> byte tokens.
#include <cstdlib>
#include <map>
#include <optional>

#include "models/gguf_file.h"
#include "models/pair_merge.h"
#include "models/tokenizer.h"
#include "models/unicode.h"

namespace strata::models {

namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581 '▁'

class SpmTokenizer final : public Tokenizer {
public:
    explicit SpmTokenizer(TokenizerVocab vocab) : Tokenizer(std::move(vocab)) {
        for (int b = 0; b < 256; ++b) byte_ids_[b] = lookup_byte(static_cast<uint8_t>(b));
        build_pieces();
    }

protected:
    void encode_text(std::string_view text, bool after_special, std::vector<int32_t>& out) const override {
        std::string s;
        s.reserve(text.size() + 8);
        if (v_.add_space_prefix && after_special) s += kSpace;
        for (char c : text) {
            if (c == ' ') {
                s += kSpace;
            } else {
                s += c;
            }
        }
        Session(*this, s).run(out);
    }

    std::string text_piece(int32_t id) const override {
        const std::string& t = v_.text[id];
        std::string out;
        if (v_.attr[id] & kAttrNormal) {
            for (size_t i = 0; i < t.size();) {
                if (t.compare(i, kSpace.size(), kSpace) == 0) {
                    out += ' ';
                    i += kSpace.size();
                } else {
                    out += t[i++];
                }
            }
        } else if ((v_.attr[id] & kAttrByte) && t.size() >= 5) {
            out.push_back(static_cast<char>(std::strtol(t.substr(3, 2).c_str(), nullptr, 16)));
        }
        return out;
    }

private:
    // llama.cpp's byte_to_token: "<0xXX>", else the byte as a one-character token. Where
    // neither exists llama.cpp throws; we fall back to <unk> (or drop the byte without one).
    int32_t lookup_byte(uint8_t b) const {
        static constexpr char kHex[] = "0123456789ABCDEF";
        const char name[6] = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'};
        if (int32_t id = v_.find(std::string_view(name, 6)); id >= 0) return id;
        const char c = static_cast<char>(b);
        if (int32_t id = v_.find(std::string_view(&c, 1)); id >= 0) return id;
        return v_.unk;
    }

    // One tokenization: its symbols and the merges that made them.
    class Session {
    public:
        Session(const SpmTokenizer& tok, std::string_view text) : tok_(tok), text_(text) {}

        void run(std::vector<int32_t>& out) {
            // The highest score of the token a pair forms merges first; each merge is kept so a
            // final symbol that is not a token splits back into the two it was made from.
            sym_ = merge_pairs(text_, [&](int32_t l, int32_t r, const std::vector<MergeSymbol>& sym) -> std::optional<float> {
                const std::string_view t = text_.substr(sym[l].start, sym[l].n + sym[r].n);
                const int32_t id = tok_.v_.find(t);
                if (id < 0) return std::nullopt;
                rev_merge_[std::string(t)] = {l, r};
                return tok_.v_.score[id];
            });
            if (sym_.empty()) return;
            for (int32_t i = 0; i != -1; i = sym_[i].next) resegment(sym_[i], out);
        }

    private:
        // Emits a final symbol: its token, else the two symbols it was merged from, else bytes.
        void resegment(const MergeSymbol& s, std::vector<int32_t>& out) {
            const std::string_view t = text_.substr(s.start, s.n);
            if (const int32_t id = tok_.v_.find(t); id >= 0) {
                out.push_back(id);
                return;
            }
            if (auto it = rev_merge_.find(t); it != rev_merge_.end()) {
                const auto [l, r] = it->second;
                resegment(sym_[l], out);
                resegment(sym_[r], out);
                return;
            }
            for (char c : t) {
                const int32_t id = tok_.byte_ids_[static_cast<uint8_t>(c)];
                if (id >= 0) out.push_back(id);
            }
        }

        const SpmTokenizer& tok_;
        std::string_view text_;
        std::vector<MergeSymbol> sym_;
        std::map<std::string, std::pair<int32_t, int32_t>, std::less<>> rev_merge_;
    };

    int32_t byte_ids_[256];
};

}  // namespace

namespace tokenizer_detail {

std::unique_ptr<Tokenizer> make_spm_tokenizer(const GgufFile& file) {
    VocabDefaults d;  // llama.cpp's SentencePiece defaults
    d.bos = 1, d.eos = 2, d.unk = 0;
    d.add_bos = true;
    d.add_space_prefix = true;
    return std::make_unique<SpmTokenizer>(load_vocab(file, d));
}

}  // namespace tokenizer_detail

}  // namespace strata::models
