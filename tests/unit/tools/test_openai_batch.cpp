// OpenAI batch lines and the resumable output file: each bad line becomes an error record
// with its custom_id when known; a partial last line from a killed run is cut off on reopen.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "models/gguf_file.h"
#include "tests/support/gguf_writer.h"
#include "tests/support/model_paths.h"
#include "tools/openai/batch.h"
#include "tools/openai/batch_output.h"

using namespace strata;
using namespace strata::models;
using namespace strata::openai;
using namespace strata::runtime;
using nlohmann::json;

namespace {
std::string read_file(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
}
}  // namespace

TEST_CASE("openai batch: lines", "[unit][openai]") {
    const std::filesystem::path path = test::tiny_llama_path();
    const GgufFile file = GgufFile::open(path);
    const auto tok = Tokenizer::from_gguf(file);
    const ChatTemplate tmpl(ChatFamily::ChatML);
    const ModelContext m{*tok, tmpl, 128, "tiny"};

    const json good = {{"custom_id", "a1"},
                       {"method", "POST"},
                       {"url", "/v1/completions"},
                       {"body", {{"model", "gpt-4"}, {"prompt", "Once"}, {"max_tokens", 4}, {"temperature", 0}}}};
    const BatchLine ok = parse_batch_line(good.dump(), 3, m);
    REQUIRE(ok.request);
    CHECK_FALSE(ok.error);
    CHECK(ok.custom_id == "a1");
    CHECK(ok.line_no == 3);
    CHECK(ok.request->endpoint == Endpoint::Completions);
    CHECK(ok.request->params.n_predict == 4);

    struct Case {
        std::string line;
        std::optional<std::string> custom_id;
        std::string code;
    };
    json no_id = good;
    no_id.erase("custom_id");
    json bad_url = good;
    bad_url["url"] = "/v1/embeddings";
    json bad_method = good;
    bad_method["method"] = "GET";
    json bad_body = good;
    bad_body["body"]["temperature"] = "warm";
    json streamed = good;
    streamed["body"]["stream"] = true;
    const std::vector<Case> cases = {
        {"{not json", std::nullopt, "invalid_json_line"},
        {"[1,2]", std::nullopt, "invalid_json_line"},
        {no_id.dump(), std::nullopt, "missing_custom_id"},
        {bad_url.dump(), "a1", "invalid_url"},
        {bad_method.dump(), "a1", "invalid_method"},
        {bad_body.dump(), "a1", "invalid_request"},
        {streamed.dump(), "a1", "invalid_request"},
    };
    for (const Case& c : cases) {
        INFO(c.line);
        const BatchLine b = parse_batch_line(c.line, 9, m);
        CHECK_FALSE(b.request);
        REQUIRE(b.error);
        CHECK(b.custom_id == c.custom_id);
        const json rec = batch_error_record(b.custom_id, b.line_no, *b.error);
        CHECK(rec["response"].is_null());
        CHECK(rec["error"]["code"] == c.code);
        CHECK(rec["error"]["line"] == 9);
        CHECK(rec["custom_id"] == (c.custom_id ? json(*c.custom_id) : json(nullptr)));
    }

    GenerateResult r;
    r.prompt_tokens = ok.request->prompt;
    r.tokens = {5, 6};
    r.text = "upon";
    r.stop_reason = "length";
    const json rec = batch_success_record("a1", *ok.request, r, *tok);
    CHECK(rec["custom_id"] == "a1");
    CHECK(rec["error"].is_null());
    CHECK(rec["id"].get<std::string>().rfind("batch_req_", 0) == 0);
    CHECK(rec["response"]["status_code"] == 200);
    CHECK(rec["response"]["body"]["object"] == "text_completion");
    CHECK(rec["response"]["body"]["choices"][0]["text"] == "upon");
    CHECK(rec["response"]["body"]["usage"]["completion_tokens"] == 2);
    CHECK(rec["response"]["body"]["model"] == "tiny");  // the model that ran, whatever the line named
}

TEST_CASE("openai batch: the output file resumes", "[unit][openai]") {
    const auto out = test::temp_path("batch_out.jsonl");
    std::filesystem::remove(out);
    {
        BatchOutput o(out);
        CHECK(o.n_answered() == 0);
        o.append({{"custom_id", "a"}, {"response", {{"status_code", 200}}}, {"error", nullptr}});
        o.append(batch_error_record(std::nullopt, 7, invalid_request("bad", {}, "invalid_json_line")));
        o.sync();
    }
    const std::string whole = read_file(out);
    CHECK(std::count(whole.begin(), whole.end(), '\n') == 2);
    // A run killed in the middle of a line.
    std::ofstream(out, std::ios::app) << R"({"custom_id": "b", "respo)";
    {
        BatchOutput o(out);
        CHECK(o.truncated_bytes() == std::string(R"({"custom_id": "b", "respo)").size());
        CHECK(read_file(out) == whole);
        CHECK(o.answered(std::string("a"), 1));
        CHECK_FALSE(o.answered(std::string("b"), 2));
        CHECK(o.answered(std::nullopt, 7));
        CHECK_FALSE(o.answered(std::nullopt, 8));
        o.append({{"custom_id", "b"}, {"response", nullptr}, {"error", nullptr}});
    }
    const std::string after = read_file(out);
    CHECK(after == whole + "{\"custom_id\":\"b\",\"error\":null,\"response\":null}\n");
    // A whole record whose line break went missing is kept, and ended.
    std::ofstream(out, std::ios::app) << R"({"custom_id": "c", "response": null, "error": null})";
    {
        const BatchOutput o(out);
        CHECK(o.truncated_bytes() == 0);
        CHECK(o.answered(std::string("c"), 4));
    }
    CHECK(read_file(out) == after + R"({"custom_id": "c", "response": null, "error": null})" + "\n");
    std::filesystem::remove(out);
}

TEST_CASE("openai batch: a file that is not an earlier run's output is refused and left as it was", "[unit][openai]") {
    const auto out = test::temp_path("batch_out_notes.txt");
    for (const std::string notes : {std::string("my notes\n{\"custom_id\": \"a\"}\nlast line without a line break"),
                                    std::string("my notes without a line break"),
                                    // another run's input: objects, but not records
                                    std::string("{\"custom_id\": \"a\", \"method\": \"POST\"}\n")}) {
        INFO(notes);
        std::ofstream(out) << notes;
        CHECK_THROWS_WITH(BatchOutput(out), Catch::Contains("is not the output of a batch run: its line 1 is not a record"));
        CHECK(read_file(out) == notes);
    }
    std::filesystem::remove(out);
}

TEST_CASE("openai batch: error records with a line that is not a number are kept but name no line", "[unit][openai]") {
    const auto out = test::temp_path("batch_out_lines.jsonl");
    std::ofstream(out) << R"({"response": null, "error": {"line": "3"}})" << "\n"
                       << R"({"response": null, "error": {"line": -4}})" << "\n"
                       << R"({"response": null, "error": {"line": 5}})" << "\n";
    const BatchOutput o(out);
    CHECK(o.n_answered() == 1);
    CHECK(o.answered(std::nullopt, 5));
    CHECK_FALSE(o.answered(std::nullopt, 3));
    std::filesystem::remove(out);
}

TEST_CASE("openai batch: an output that is a FIFO or a device is written, never read for an earlier run", "[unit][openai]") {
    const auto fifo = test::temp_path("batch_out.fifo");
    std::filesystem::remove(fifo);
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    // Its read end open first, so that what is appended waits in the pipe.
    const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
    REQUIRE(reader >= 0);
    {
        BatchOutput o(fifo);  // returns at once: nothing to resume
        CHECK(o.n_answered() == 0);
        o.append({{"custom_id", "a"}});
        CHECK_NOTHROW(o.sync());  // nothing to make durable (fdatasync refuses a pipe)
    }
    char got[64] = {};
    CHECK(std::string(got, std::max<ssize_t>(0, ::read(reader, got, sizeof got))) == "{\"custom_id\":\"a\"}\n");
    ::close(reader);
    std::filesystem::remove(fifo);
    BatchOutput null("/dev/null");  // endless reads from /dev/zero-like devices are never attempted
    CHECK(null.n_answered() == 0);
    CHECK_NOTHROW(null.sync());
}
