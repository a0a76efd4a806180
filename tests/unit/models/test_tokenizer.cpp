// Tokenizers against llama.cpp: every corpus string must give the ids recorded by
// tests/reference/make_tokenizer_fixtures.py (llama-cpp-python), with and without special-token
// parsing, and decode(encode(s)) must give s back where that is meant to hold.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>

#include "core/error.h"
#include "models/gguf_file.h"
#include "models/tokenizer.h"
#include "models/unicode.h"
#include "tests/support/gguf_writer.h"
#include "tests/support/model_paths.h"

using namespace strata;
using namespace strata::models;
using nlohmann::json;

namespace {

const std::filesystem::path kFixtures = std::filesystem::path(STRATA_SOURCE_DIR) / "tests" / "fixtures";

std::vector<json> read_jsonl(const std::filesystem::path& path) {
    std::ifstream in(path);
    REQUIRE(in.good());
    std::vector<json> rows;
    for (std::string line; std::getline(in, line);) {
        if (line.empty()) continue;
        json j = json::parse(line);
        if (!j.contains("_meta")) rows.push_back(std::move(j));
    }
    return rows;
}

std::string from_hex(const std::string& hex) {
    std::string out;
    for (size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    return out;
}

// Corpus id -> the bytes to tokenize.
const std::map<int, std::string>& corpus() {
    static const std::map<int, std::string> c = [] {
        std::map<int, std::string> m;
        for (const json& e : read_jsonl(kFixtures / "tokenizer_corpus.jsonl"))
            m[e.at("id").get<int>()] = e.contains("hex") ? from_hex(e.at("hex")) : e.at("text").get<std::string>();
        return m;
    }();
    return c;
}

std::string printable(const std::string& s) {
    std::string out;
    for (unsigned char c : s) {
        if (c < 0x20 || c == 0x7F) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", c);
            out += buf;
        } else {
            out += static_cast<char>(c);
        }
    }
    return out.size() > 200 ? out.substr(0, 200) + "..." : out;
}

struct MatchCount {
    int rows = 0, plain_ok = 0, special_ok = 0;
};

// Compares every fixture row (optionally only those with "pre" == `pre`) with our ids.
MatchCount check_fixture(const Tokenizer& tok, const std::vector<json>& rows, const std::string& pre = {}) {
    MatchCount n;
    for (const json& row : rows) {
        if (!pre.empty() && row.at("pre") != pre) continue;
        const std::string& text = corpus().at(row.at("id").get<int>());
        const auto want_plain = row.at("plain").get<std::vector<int32_t>>();
        const auto want_special = row.at("special").get<std::vector<int32_t>>();
        const auto got_plain = tok.encode(text, tok.add_bos_default(), false, tok.add_eos_default());
        const auto got_special = tok.encode(text, tok.add_bos_default(), true, tok.add_eos_default());
        ++n.rows;
        n.plain_ok += got_plain == want_plain;
        n.special_ok += got_special == want_special;
        INFO("corpus id " << row.at("id") << " pre '" << pre << "': \"" << printable(text) << "\"");
        CHECK(got_plain == want_plain);
        CHECK(got_special == want_special);
    }
    return n;
}

std::unique_ptr<Tokenizer> load(const std::filesystem::path& path) {
    return Tokenizer::from_gguf(GgufFile::open(path, /*map_data=*/false));
}

// Little-endian payloads for GgufWriter::kv_raw.
template <class T>
void put(std::vector<uint8_t>& out, T v) {
    uint8_t b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    out.insert(out.end(), b, b + sizeof(T));
}
std::vector<uint8_t> i32_array(const std::vector<int64_t>& v) {
    std::vector<uint8_t> p;
    put<uint32_t>(p, 5);  // GGUF INT32
    put<uint64_t>(p, v.size());
    for (int64_t x : v) put<int32_t>(p, static_cast<int32_t>(x));
    return p;
}
std::vector<uint8_t> boolean(bool b) { return {static_cast<uint8_t>(b)}; }

// SmolLM2's tokenizer keys with tokenizer.ggml.pre replaced, as the fixture script does.
std::filesystem::path write_pre_variant(const GgufFile& src, const std::string& pre) {
    test::GgufWriter w;
    w.kv_string("general.architecture", "llama")
        .kv_string("tokenizer.ggml.model", src.get_string("tokenizer.ggml.model"))
        .kv_string("tokenizer.ggml.pre", pre)
        .kv_string_array("tokenizer.ggml.tokens", src.get_string_array("tokenizer.ggml.tokens"))
        .kv_raw("tokenizer.ggml.token_type", 9, i32_array(src.get_int_array("tokenizer.ggml.token_type")))
        .kv_string_array("tokenizer.ggml.merges", src.get_string_array("tokenizer.ggml.merges"));
    for (const char* key : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                            "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id"})
        if (auto v = src.get_int_opt(key)) w.kv_u32(key, static_cast<uint32_t>(*v));
    for (const char* key : {"tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_space_prefix"})
        if (auto v = src.get_bool_opt(key)) w.kv_raw(key, 7, boolean(*v));
    auto path = test::temp_path("tokenizer_pre_" + pre + ".gguf");
    w.write(path);
    return path;
}

// A minimal vocabulary file for the error paths.
std::filesystem::path write_tiny(const std::string& name, const std::string& model, const std::string& pre) {
    test::GgufWriter w;
    if (!model.empty()) w.kv_string("tokenizer.ggml.model", model);
    if (!pre.empty()) w.kv_string("tokenizer.ggml.pre", pre);
    w.kv_string_array("tokenizer.ggml.tokens", {"a", "b", "ab"}).kv_string_array("tokenizer.ggml.merges", {"a b"});
    auto path = test::temp_path(name);
    w.write(path);
    return path;
}

std::vector<std::string> split(std::string_view text, std::initializer_list<unicode::SplitRule> rules) {
    return unicode::split(text, std::vector<unicode::SplitRule>(rules));
}

}  // namespace

TEST_CASE("stories260K tokenizer matches llama.cpp on the corpus", "[unit][tokenizer]") {
    const std::filesystem::path path = test::tiny_llama_path();
    const auto tok = load(path);

    // From shared/models/README.md (llama-tokenize).
    CHECK(tok->encode("Once upon a time", tok->add_bos_default(), false) == std::vector<int32_t>{1, 403, 407, 261, 378});

    const auto n = check_fixture(*tok, read_jsonl(kFixtures / "tokenizer_ids_stories260k.jsonl"));
    WARN("stories260K: " << n.plain_ok << "/" << n.rows << " plain, " << n.special_ok << "/" << n.rows
                         << " with specials match llama.cpp");
    CHECK(n.rows == static_cast<int>(corpus().size()));
}

TEST_CASE("stories260K special tokens and pieces", "[unit][tokenizer]") {
    const std::filesystem::path path = test::tiny_llama_path();
    const auto tok = load(path);
    CHECK(tok->model() == "llama");
    CHECK(tok->n_vocab() == 512);
    CHECK(tok->bos() == 1);
    CHECK(tok->eos() == 2);
    CHECK(tok->unk() == 0);
    CHECK(tok->add_bos_default());
    CHECK_FALSE(tok->add_eos_default());
    CHECK(tok->is_eog(2));
    CHECK_FALSE(tok->is_eog(1));
    CHECK(tok->is_control(1));
    CHECK(tok->piece(1) == "<s>");
    CHECK(tok->piece(3 + '\n') == "\n");  // <0x0A>
    CHECK(tok->piece(-1).empty());
    CHECK(tok->piece(512).empty());
    CHECK(tok->find_token("<0x41>") == 3 + 'A');
    CHECK_FALSE(tok->find_token("no such token").has_value());
    // The space prefix goes at the start and after each special token, as in llama.cpp.
    CHECK(tok->encode("<s>hi</s> <unk>x", true, true) == std::vector<int32_t>{1, 1, 270, 417, 2, 410, 410, 0, 410, 444});
    CHECK(tok->encode("", true, false) == std::vector<int32_t>{1});
    CHECK(tok->encode("", false, false).empty());
    CHECK(tok->encode("a", false, false, true).back() == 2);
    const std::vector<int32_t> with_bos{1, 403, 407, 261, 378};
    CHECK(tok->decode(with_bos) == "Once upon a time");
    CHECK(tok->decode(with_bos, true) == "<s>Once upon a time");
}

TEST_CASE("stories260K decode(encode(s)) == s", "[unit][tokenizer]") {
    const std::filesystem::path path = test::tiny_llama_path();
    const auto tok = load(path);
    int n = 0;
    for (const auto& [id, text] : corpus()) {
        if (!unicode::is_valid_utf8(text)) continue;  // invalid bytes come back as U+FFFD by design
        // A literal '▁' reads back as a space: SentencePiece cannot tell them apart.
        if (text.find("\xE2\x96\x81") != std::string::npos) continue;
        INFO("corpus id " << id << ": \"" << printable(text) << "\"");
        CHECK(tok->decode(tok->encode(text, true, false)) == text);
        CHECK(tok->decode(tok->encode(text, false, false)) == text);
        ++n;
    }
    CHECK(n > 300);
}

TEST_CASE("SmolLM2 tokenizer matches llama.cpp on the corpus", "[model][tokenizer]") {
    const auto path = test::default_model_path();
    STRATA_REQUIRE_MODEL(path, "SmolLM2-135M-Instruct.Q4_1.gguf");
    const auto tok = load(*path);
    CHECK(tok->pre() == "smollm");
    const auto n = check_fixture(*tok, read_jsonl(kFixtures / "tokenizer_ids_smollm2.jsonl"));
    WARN("SmolLM2: " << n.plain_ok << "/" << n.rows << " plain, " << n.special_ok << "/" << n.rows
                     << " with specials match llama.cpp");
    CHECK(n.rows == static_cast<int>(corpus().size()));
}

TEST_CASE("SmolLM2 vocabulary with other BPE pre-tokenizers matches llama.cpp", "[model][tokenizer]") {
    const auto path = test::default_model_path();
    STRATA_REQUIRE_MODEL(path, "SmolLM2-135M-Instruct.Q4_1.gguf");
    const auto src = GgufFile::open(*path, false);
    const auto rows = read_jsonl(kFixtures / "tokenizer_ids_smollm2_pre.jsonl");
    for (std::string pre : {"llama-bpe", "qwen2", "gpt-2", "default"}) {
        const auto tok = load(write_pre_variant(src, pre));
        CHECK(tok->pre() == pre);
        const auto n = check_fixture(*tok, rows, pre);
        WARN("pre " << pre << ": " << n.plain_ok << "/" << n.rows << " plain, " << n.special_ok << "/" << n.rows
                    << " with specials match llama.cpp");
        CHECK(n.rows == static_cast<int>(corpus().size()));
    }
}

TEST_CASE("SmolLM2 special tokens, EOG and round trip", "[model][tokenizer]") {
    const auto path = test::default_model_path();
    STRATA_REQUIRE_MODEL(path, "SmolLM2-135M-Instruct.Q4_1.gguf");
    const auto tok = load(*path);
    CHECK(tok->model() == "gpt2");
    CHECK(tok->n_vocab() == 49152);
    CHECK(tok->bos() == 1);
    CHECK(tok->eos() == 2);
    CHECK_FALSE(tok->add_bos_default());
    // llama.cpp: <|endoftext|>, <|im_end|> and <reponame> (a FIM repo marker) end generation.
    CHECK(std::vector<int32_t>(tok->eog_ids().begin(), tok->eog_ids().end()) == std::vector<int32_t>{0, 2, 4});
    // Both <|endoftext|> and <|im_end|> look like EOT; llama.cpp takes the first in its token
    // map's iteration order, and so do we.
    CHECK(tok->eot() == 0);
    CHECK(tok->find_token("<|im_end|>") == 2);
    CHECK(tok->piece(1) == "<|im_start|>");
    CHECK(tok->piece(tok->find_token("\xC4\xA0the").value_or(-1)) == " the");  // "Ġthe"
    CHECK(tok->encode("<|im_start|>user", false, true).front() == 1);
    CHECK(tok->encode("<|im_start|>user", false, false).front() != 1);

    int n = 0;
    for (const auto& [id, text] : corpus()) {
        if (!unicode::is_valid_utf8(text)) continue;
        // SmolLM2 has no token for bytes 0x04, 0x06, 0x13, 0x14, 0x16, 0x1D: llama.cpp drops them too.
        if (!std::all_of(text.begin(), text.end(), [&](char c) {
                return tok->find_token(unicode::byte_to_bpe_char(static_cast<uint8_t>(c))).has_value();
            }))
            continue;
        ++n;
        INFO("corpus id " << id << ": \"" << printable(text) << "\"");
        CHECK(tok->decode(tok->encode(text, false, false)) == text);
        CHECK(tok->decode(tok->encode(text, false, true), /*special=*/true) == text);
    }
    CHECK(n > 300);
}

TEST_CASE("Tokenizer::from_gguf rejects unsupported tokenizers", "[unit][tokenizer]") {
    auto error_of = [](const std::filesystem::path& p) -> std::string {
        try {
            load(p);
        } catch (const FormatError& e) {
            return std::string(e.what()) + " | " + e.hint();
        }
        return "no error";
    };
    const auto unknown_model = error_of(write_tiny("tok_wpm.gguf", "bert", ""));
    CHECK_THAT(unknown_model, Catch::Contains("'bert'") && Catch::Contains("gpt2") && Catch::Contains("llama"));
    const auto unknown_pre = error_of(write_tiny("tok_pre.gguf", "gpt2", "no-such-pre"));
    CHECK_THAT(unknown_pre, Catch::Contains("'no-such-pre'") && Catch::Contains("smollm") && Catch::Contains("qwen2"));
    CHECK_THAT(error_of(write_tiny("tok_none.gguf", "", "")), Catch::Contains("tokenizer.ggml.model"));
    // A tiny BPE vocabulary works, with llama.cpp's missing-pre fallback ("default").
    const auto tok = load(write_tiny("tok_tiny.gguf", "gpt2", ""));
    CHECK(tok->encode("ab", false, false) == std::vector<int32_t>{2});
    CHECK(tok->bos() == -1);  // the GPT-2 default id 11 is outside this vocabulary
}

TEST_CASE("UTF-8 decoding follows llama.cpp on invalid input", "[unit][tokenizer]") {
    using V = std::vector<uint32_t>;
    CHECK(unicode::decode_utf8("a\xC3\xA9") == V{'a', 0xE9});
    CHECK(unicode::decode_utf8("\x80") == V{0xFFFD});
    CHECK(unicode::decode_utf8("\xE2\x82") == V{0xFFFD, 0xFFFD});          // truncated: one U+FFFD per byte
    CHECK(unicode::decode_utf8("\xC0\x80") == V{0});                       // overlong, decoded as written
    CHECK(unicode::decode_utf8("\xED\xA0\x80") == V{0xD800});              // surrogate, decoded as written
    CHECK(unicode::decode_utf8("\xF4\x90\x80\x80") == V{0xFFFD, 0xFFFD, 0xFFFD, 0xFFFD});  // past U+10FFFF
    CHECK(unicode::decode_utf8("\xF8\x88") == V{0xFFFD, 0xFFFD});
    CHECK(unicode::decode_utf8("") == V{});
    CHECK(unicode::is_valid_utf8("h\xC3\xA9llo \xF0\x9F\x98\x80"));
    CHECK_FALSE(unicode::is_valid_utf8("\xC0\x80"));
    CHECK_FALSE(unicode::is_valid_utf8("\xED\xA0\x80"));
    CHECK_FALSE(unicode::is_valid_utf8("\xE2\x82"));
    std::string s;
    for (uint32_t c : {0x41u, 0xE9u, 0x20ACu, 0x1F600u}) unicode::append_utf8(s, c);
    CHECK(s == "A\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
    for (int b = 0; b < 256; ++b) {
        const auto cpts = unicode::decode_utf8(unicode::byte_to_bpe_char(static_cast<uint8_t>(b)));
        REQUIRE(cpts.size() == 1);
        CHECK(unicode::bpe_char_to_byte(cpts[0]) == b);
    }
    CHECK(unicode::byte_to_bpe_char(' ') == "\xC4\xA0");  // 'Ġ'
}

TEST_CASE("Codepoint categories", "[unit][tokenizer]") {
    using namespace unicode;
    CHECK(unicode::table_version() == "15.1.0");
    CHECK((cpt_flags('a') & kLetter));
    CHECK((cpt_flags('7') & kNumber));
    CHECK((cpt_flags(' ') & kWhitespace));
    CHECK((cpt_flags(0x3000) & kWhitespace));
    CHECK_FALSE((cpt_flags(0x1C) & kWhitespace));  // Python's isspace() says yes; White_Space says no
    CHECK_FALSE((cpt_flags(0x200B) & kWhitespace));
    CHECK((cpt_flags(0x4E2D) & kLetter));   // 中
    CHECK((cpt_flags(0x0301) & kMark));
    CHECK((cpt_flags(0x00BD) & kNumber));   // ½
    CHECK((cpt_flags(0x1F600) & kSymbol));
    CHECK((cpt_flags('!') & kPunctuation));
    CHECK((cpt_flags('$') & kSymbol));
    CHECK(cpt_flags(0x0378) == kUndefined);
    CHECK(cpt_flags(0x110000) == kUndefined);
}

TEST_CASE("deepseek-llm, deepseek-v3 and gpt-4o pre-tokenizers split as their regexes do (regex package)", "[unit][tokenizer]") {
    // tests/reference/make_pretokenizer_fixtures.py: llama.cpp's regex lists for these names run
    // by another engine over the corpus and strings of Latin, Greek, Cyrillic, CJK, kana, Hangul,
    // fullwidth forms, marks, odd whitespace and mixed case.
    const auto rows = read_jsonl(kFixtures / "tokenizer_pre_splits.jsonl");
    REQUIRE(rows.size() > 900);
    std::map<std::string, int> checked;
    for (const json& r : rows) {
        const std::string pre = r["pre"], text = from_hex(r["hex"]);
        std::vector<std::string> want;
        for (const auto& p : r["pieces"]) want.push_back(from_hex(p));
        INFO("pre " << pre << " id " << r["id"].dump() << " text " << text);
        const auto rules = tokenizer_detail::bpe_pre_rules(pre);
        CHECK(unicode::split(text, rules) == want);
        ++checked[pre];
    }
    CHECK(checked.size() == 3);
    try {
        tokenizer_detail::bpe_pre_rules("o200k-unknown");
        FAIL("an unknown pre-tokenizer was accepted");
    } catch (const FormatError& e) {
        CHECK_THAT(e.hint(), Catch::Contains("deepseek-llm") && Catch::Contains("deepseek-v3") && Catch::Contains("gpt-4o"));
    }
}

TEST_CASE("Pre-tokenizer splits", "[unit][tokenizer]") {
    using R = unicode::SplitRule;
    using S = std::vector<std::string>;
    CHECK(split("Hello world's  end", {R::Gpt2}) == S{"Hello", " world", "'s", " ", " end"});
    CHECK(split("I'M 123 ok!!", {R::Gpt2}) == S{"I", "'", "M", " 123", " ok", "!!"});
    CHECK(split("x  \n", {R::Gpt2}) == S{"x", "  \n"});
    CHECK(split("a1234b", {R::EachNumber, R::Gpt2}) == S{"a", "1", "2", "3", "4", "b"});
    CHECK(split(" 42", {R::EachNumber, R::Gpt2}) == S{" ", "4", "2"});
    CHECK(split("I'M 1234567 ok", {R::Llama3}) == S{"I", "'M", " ", "123", "456", "7", " ok"});
    CHECK(split("x\n\n  y", {R::Llama3}) == S{"x", "\n\n", " ", " y"});
    CHECK(split("a.\n\nb", {R::Llama3}) == S{"a", ".\n\n", "b"});
    CHECK(split("\thello", {R::Llama3}) == S{"\thello"});
    CHECK(split("ab 1234", {R::Qwen2}) == S{"ab", " ", "1", "2", "3", "4"});
    CHECK(split("a, b... 1234567", {R::PunctuationRuns, R::Gpt2, R::NumberRuns, R::AsciiDigits3}) ==
          S{"a", ",", " b", "...", " ", "123", "456", "7"});
    CHECK(split("", {R::Gpt2}).empty());
    CHECK(split("\xFF", {R::Gpt2}) == S{"\xEF\xBF\xBD"});
}
