// /v1/embeddings and the token endpoints' bodies: inputs of every documented form, base64 as
// RFC 4648 has it, and each malformed body a 400 naming the field.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "models/gguf_file.h"
#include "tests/support/model_paths.h"
#include "tools/openai/api_error.h"
#include "tools/openai/embeddings.h"
#include "tools/openai/tokenize.h"
#include "tests/support/api_errors.h"

using namespace strata;
using namespace strata::openai;

using strata::test::param_of;

namespace {
struct Vocab {
    models::GgufFile file;
    std::unique_ptr<models::Tokenizer> tok;
    models::ChatTemplate tmpl{models::ChatFamily::ChatML};
    explicit Vocab(const std::filesystem::path& p) : file(models::GgufFile::open(p)), tok(models::Tokenizer::from_gguf(file)) {}
    ModelContext context() const { return {*tok, tmpl, 64, "tiny", runtime::Pooling::Last, 64}; }
};

}  // namespace

TEST_CASE("openai embeddings: base64 as RFC 4648", "[unit][openai]") {
    // Python: base64.b64encode(b"ab"), (b"abcd"), (struct.pack("<3f", 1.0, -0.5, 0.25)).
    CHECK(base64("ab") == "YWI=");
    CHECK(base64("abcd") == "YWJjZA==");
    CHECK(base64("") == "");
    const float v[] = {1.0f, -0.5f, 0.25f};
    CHECK(base64(std::string_view(reinterpret_cast<const char*>(v), sizeof v)) == "AACAPwAAAL8AAIA+");
}

TEST_CASE("openai embeddings: every input form, and the answer's shape", "[unit][openai]") {
    const std::filesystem::path path = test::tiny_llama_path();
    const Vocab v(path);
    const ModelContext m = v.context();
    const EmbeddingRequest one = parse_embedding_request(R"({"input": "Once upon", "model": "x"})", m);
    REQUIRE(one.inputs.size() == 1);
    CHECK(one.inputs[0] == embedding_tokens("Once upon", *v.tok));
    CHECK(one.inputs[0].front() == v.tok->bos());  // stories260K adds BOS
    CHECK(one.model == "x");
    const EmbeddingRequest many = parse_embedding_request(R"({"input": ["a", [5, 6], "b"], "encoding_format": "base64"})", m);
    REQUIRE(many.inputs.size() == 3);
    CHECK(many.inputs[1] == std::vector<int32_t>{5, 6});
    CHECK(many.base64);
    CHECK(many.model == "tiny");
    CHECK(parse_embedding_request(R"({"input": [7, 8, 9]})", m).inputs == std::vector<std::vector<int32_t>>{{7, 8, 9}});

    std::vector<runtime::GenerateResult> results(3);
    for (auto& r : results) r.embedding = {1.0f, -0.5f, 0.25f};
    const Json j = embedding_json(many, results);
    CHECK(j["object"] == "list");
    CHECK(j["data"][2]["index"] == 2);
    CHECK(j["data"][2]["object"] == "embedding");
    CHECK(j["data"][0]["embedding"] == "AACAPwAAAL8AAIA+");
    CHECK(j["usage"]["prompt_tokens"] == many.inputs[0].size() + 2 + many.inputs[2].size());
    CHECK(embedding_json(one, {results.data(), 1})["data"][0]["embedding"] == Json::array({1.0, -0.5, 0.25}));

    CHECK(param_of([&] { parse_embedding_request(R"({"model": "x"})", m); }) == "input");
    CHECK(param_of([&] { parse_embedding_request(R"({"input": 5})", m); }) == "input");
    CHECK(param_of([&] { parse_embedding_request(R"({"input": [[1, 999999]]})", m); }) == "input");
    CHECK(param_of([&] { parse_embedding_request(R"({"input": [1.5]})", m); }) == "input");
    CHECK(param_of([&] { parse_embedding_request(R"({"input": [[]]})", m); }) == "input");
    CHECK(param_of([&] { parse_embedding_request(R"({"input": "x", "encoding_format": "hex"})", m); }) == "encoding_format");
    CHECK(param_of([&] { parse_embedding_request(R"({"input": "x", "dimensions": 8})", m); }) == "dimensions");
    std::string longer(200, 'a');
    CHECK(param_of([&] { parse_embedding_request("{\"input\": \"" + longer + "\"}", m); }) == "input");
    // Ollama's truncate: an input past the context keeps its first tokens.
    const EmbeddingRequest cut = parse_embedding_request("{\"input\": \"" + longer + "\", \"truncate\": true}", m);
    const std::vector<int32_t> whole = embedding_tokens(longer, *v.tok);
    REQUIRE(whole.size() >= 64);
    CHECK(cut.inputs[0] == std::vector<int32_t>(whole.begin(), whole.begin() + 64));  // the whole context: nothing is generated
}

TEST_CASE("openai token endpoints: tokenize, detokenize and the rendered prompt", "[unit][openai]") {
    const std::filesystem::path path = test::tiny_llama_path();
    const Vocab v(path);
    const ModelContext m = v.context();
    const Json t = tokenize_json(Json::parse(R"({"content": "Once upon"})"), m);
    CHECK(t["tokens"].get<std::vector<int32_t>>() == v.tok->encode("Once upon", false, true));
    const Json special = tokenize_json(Json::parse(R"({"content": "Once upon", "add_special": true})"), m);
    CHECK(special["tokens"][0] == v.tok->bos());
    const Json pieces = tokenize_json(Json::parse(R"({"content": "Once", "with_pieces": true})"), m);
    CHECK(pieces["tokens"][0] == Json({{"id", *v.tok->find_token("▁Once")}, {"piece", " Once"}}));
    const Json bytes = tokenize_json(Json::parse(R"({"content": "中", "with_pieces": true})"), m);  // byte tokens: not UTF-8 alone
    CHECK(bytes["tokens"][1]["piece"].is_array());
    // The pieces joined, as llama.cpp's server answers: the space SentencePiece put before the first word stays.
    const Json back = detokenize_json(Json({{"tokens", t["tokens"]}}), m);
    CHECK(back["content"] == " Once upon");
    CHECK(detokenize_json(Json({{"tokens", {v.tok->bos(), *v.tok->find_token("▁Once")}}}), m)["content"] == "<s> Once");
    CHECK(apply_template_json(Json::parse(R"({"messages": [{"role": "user", "content": "hi"}]})"), m)["prompt"] ==
          "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
    CHECK(param_of([&] { tokenize_json(Json::parse(R"({"text": "x"})"), m); }) == "content");
    CHECK(param_of([&] { detokenize_json(Json::parse(R"({"tokens": [1, -1]})"), m); }) == "tokens");
    CHECK(param_of([&] { apply_template_json(Json::parse(R"({"messages": []})"), m); }) == "messages");
}
