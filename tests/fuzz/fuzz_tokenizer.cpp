// Tokenizers on arbitrary text: encode and decode must not crash, every id must be in the
// vocabulary, and decode(encode(s)) == s must hold where tokenizer.h promises it (valid
// UTF-8, special tokens not parsed; for SentencePiece no literal '▁', for byte-level BPE
// only bytes the vocabulary has). The first input byte picks the tokenizer and flags:
// bit 0 SentencePiece (stories260K) or byte-level BPE (SmolLM2), bit 1 parse_special,
// bit 2 add BOS. Arbitrary ids (the input read as int32s) must decode without crashing too.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

#include "models/gguf_file.h"
#include "models/tokenizer.h"
#include "models/unicode.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

using strata::models::Tokenizer;

std::unique_ptr<strata::models::Tokenizer> load(const std::optional<std::filesystem::path>& path) {
    if (!path) return nullptr;
    return strata::models::Tokenizer::from_gguf(strata::models::GgufFile::open(*path, /*map_data=*/false));
}

std::unique_ptr<strata::models::Tokenizer> g_bpe, g_spm;

[[noreturn]] void fail(const char* what, std::string_view text, std::string_view got) {
    std::fprintf(stderr, "tokenizer property violated: %s\n  input (%zu bytes) decoded as (%zu bytes): '%.*s'\n", what,
                 text.size(), got.size(), static_cast<int>(got.size()), got.data());
    std::abort();
}

bool bpe_covers(const strata::models::Tokenizer& tok, std::string_view text) {
    for (char c : text)
        if (!tok.find_token(strata::models::unicode::byte_to_bpe_char(static_cast<uint8_t>(c)))) return false;
    return true;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    strata::fuzz::quiet_logging();
    g_bpe = load(strata::fuzz::bpe_model_path());
    g_spm = load(strata::fuzz::spm_model_path());
    if (!g_bpe && !g_spm) {
        std::fprintf(stderr, "fuzz_tokenizer: neither model found (set STRATA_FUZZ_MODEL / STRATA_FUZZ_SPM_MODEL)\n");
        std::exit(1);
    }
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const uint8_t flags = data[0];
    const bool spm = (flags & 1) != 0;
    const bool parse_special = (flags & 2) != 0;
    const bool add_bos = (flags & 4) != 0;
    const strata::models::Tokenizer* tok = spm ? (g_spm ? g_spm.get() : g_bpe.get()) : (g_bpe ? g_bpe.get() : g_spm.get());
    const bool is_spm = tok == g_spm.get();
    const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);

    const std::vector<int32_t> ids = tok->encode(text, add_bos, parse_special);
    for (int32_t id : ids)
        if (id < 0 || id >= tok->n_vocab()) fail("encode produced an id outside the vocabulary", text, "");
    const std::string plain = tok->decode(ids);
    const std::string with_special = tok->decode(ids, /*special=*/true);

    if (strata::models::unicode::is_valid_utf8(text)) {
        const bool covered = is_spm ? text.find("\xE2\x96\x81") == std::string_view::npos : bpe_covers(*tok, text);
        if (covered && !parse_special && plain != text) fail("decode(encode(s)) != s", text, plain);
        // Byte-level BPE keeps special tokens' text, so the round trip holds with them too.
        if (covered && parse_special && !is_spm && !add_bos && with_special != text)
            fail("decode(encode(s, parse_special), special) != s", text, with_special);
    }

    std::vector<int32_t> raw((size - 1) / 4);
    if (!raw.empty()) std::memcpy(raw.data(), data + 1, raw.size() * 4);
    (void)tok->decode(raw, true);
    for (int32_t id : raw) (void)tok->piece(id), (void)tok->token_text(id), (void)tok->is_eog(id);
    return 0;
}
