// A folder of GGUF files as the server lists them: each described from its header, named by
// its stem, with general.name as an alias only where it names one file.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "models/model_dir.h"
#include "tests/support/gguf_writer.h"

using namespace strata;
using namespace strata::models;
using strata::test::GgufWriter;

namespace {
// A three-tensor "model" with the hyperparameters a llama needs: an F32 norm of 8, an F16 token
// table and matrix of 8x4 (GGUF type 1).
void write_model(const std::filesystem::path& p, const std::string& name, uint32_t ctx, const std::string& arch = "llama") {
    GgufWriter w;
    w.kv_string("general.architecture", arch);
    if (!name.empty()) w.kv_string("general.name", name);
    w.kv_u32(arch + ".context_length", ctx);
    w.kv_u32(arch + ".embedding_length", 8);
    w.kv_u32(arch + ".block_count", 1);
    w.kv_u32(arch + ".attention.head_count", 2);
    w.kv_u32(arch + ".feed_forward_length", 16);
    w.tensor("output_norm.weight", 0, {8}, std::vector<uint8_t>(8 * 4, 0));
    w.tensor("token_embd.weight", 1, {8, 4}, std::vector<uint8_t>(8 * 4 * 2, 0));
    w.tensor("output.weight", 1, {8, 4}, std::vector<uint8_t>(8 * 4 * 2, 0));
    w.write(p);
}

std::filesystem::path fresh_dir(const char* name) {
    const auto dir = strata::test::temp_path(name);
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    return dir;
}
}  // namespace

TEST_CASE("model dir: a model described from its header", "[unit][models]") {
    const auto dir = fresh_dir("strata_model_dir_describe");
    write_model(dir / "tiny-chat.Q8.gguf", "Tiny Chat", 2048);
    const LocalModel m = describe_model(dir / "tiny-chat.Q8.gguf");
    CHECK(m.id == "tiny-chat.Q8");
    CHECK(m.alias == "Tiny Chat");
    CHECK(m.architecture == "llama");
    CHECK(m.context_length == 2048);
    CHECK(m.embedding_length == 8);
    CHECK(m.parameters == 8 + 32 + 32);
    CHECK(m.quantization == "F16");  // the matrix's type, not the norm's
    CHECK(m.size_bytes == std::filesystem::file_size(dir / "tiny-chat.Q8.gguf"));
    CHECK(m.modified > 1600000000);  // written just now
    CHECK_THROWS_AS(describe_model(dir / "absent.gguf"), Error);
}

TEST_CASE("model dir: the folder's models, by name, aliases only where unambiguous", "[unit][models]") {
    const auto dir = fresh_dir("strata_model_dir_list");
    write_model(dir / "b.gguf", "Shared Name", 512);
    write_model(dir / "a.gguf", "Shared Name", 512);
    write_model(dir / "c.gguf", "Model C", 1024);
    write_model(dir / "d.gguf", "c", 1024);  // an alias that is another model's id
    std::ofstream(dir / "notes.txt") << "not a model";
    std::ofstream(dir / "broken.gguf") << "not a GGUF either";
    write_model(dir / "0-unknown.gguf", "Unknown", 512, "zzzzz");  // an architecture no engine here runs: not the default
    const auto files = gguf_files(dir);
    REQUIRE(files.size() == 6);  // the .txt is not listed; the broken and the unknown .gguf are, and skipped below
    CHECK(files.front().filename() == "0-unknown.gguf");  // sorted
    const std::vector<LocalModel> list = describe_models(files);
    REQUIRE(list.size() == 4);
    CHECK(list[0].id == "a");
    CHECK(list[0].alias.empty());
    CHECK(list[1].alias.empty());
    CHECK(list[2].alias == "Model C");
    CHECK(list[3].alias.empty());

    CHECK(find_model(list, "c") == &list[2]);
    CHECK(find_model(list, "Model C") == &list[2]);
    CHECK(find_model(list, "c:latest") == &list[2]);  // Ollama clients add the tag
    CHECK(find_model(list, "Shared Name") == nullptr);
    CHECK(find_model(list, "gpt-9-ultra") == nullptr);
    CHECK(find_model(list, "") == nullptr);

    CHECK_THROWS_AS(gguf_files(dir / "absent"), UsageError);
}

TEST_CASE("model dir: parameter counts as Ollama writes them", "[unit][models]") {
    CHECK(parameter_size(134515008) == "135M");
    CHECK(parameter_size(8030261248ull) == "8.0B");
    CHECK(parameter_size(260000) == "260K");
    CHECK(parameter_size(8) == "8");
}
