// Bad input ends with one clear error and a non-zero exit, never a crash.
#include <algorithm>
#include <fstream>
#include <string>
#include <thread>

#include <catch2/catch.hpp>

#include "tests/support/gguf_writer.h"
#include "tests/support/model_paths.h"
#include "tests/support/run_command.h"

using namespace strata::test;

namespace {
void check_clean_failure(const CommandResult& r, const std::string& expected) {
    INFO("stderr: " << r.err);
    CHECK(r.exit_code == 1);  // 1 = handled error; a crash would be 128+signal
    CHECK_THAT(r.err, Catch::StartsWith("strata: error: ") && Catch::Contains(expected));
}
}  // namespace

TEST_CASE("CLI: a missing model file", "[unit][cli]") {
    check_clean_failure(run_strata("generate -m /nonexistent/x.gguf -p hi"), "cannot open model file '/nonexistent/x.gguf'");
}

TEST_CASE("CLI: the default model missing from the cache says how to fetch it", "[unit][cli]") {
    auto empty = temp_path("empty_models");
    std::filesystem::create_directories(empty);
    auto r = run_strata("generate -p hi", empty.string());
    check_clean_failure(r, "the default model is not at");
    CHECK_THAT(r.err, Catch::Contains("scripts/fetch_model.sh"));
}

TEST_CASE("CLI: files that are not GGUF or are broken", "[unit][cli]") {
    SECTION("wrong magic") {
        auto p = temp_path("notgguf.bin");
        std::ofstream(p) << "this is a text file, not a model, but long enough";
        check_clean_failure(run_strata("inspect " + p.string()), "not a GGUF file");
    }
    SECTION("truncated") {
        const std::filesystem::path path = tiny_llama_path();
        auto p = temp_path("truncated.gguf");
        std::filesystem::copy_file(path, p, std::filesystem::copy_options::overwrite_existing);
        std::filesystem::resize_file(p, std::filesystem::file_size(p) / 2);
        check_clean_failure(run_strata("generate -m " + p.string() + " -p hi"), "past the end of the file");
    }
    SECTION("unknown quant type") {
        GgufWriter w;
        w.kv_string("general.architecture", "llama");
        w.tensor("token_embd.weight", 77, {32, 2}, std::vector<uint8_t>(256, 0));
        auto p = temp_path("unknown_type.gguf");
        w.write(p);
        check_clean_failure(run_strata("generate -m " + p.string() + " -p hi"), "type id 77");
    }
    SECTION("unsupported architecture") {
        GgufWriter w;
        w.kv_string("general.architecture", "rwkv6");
        auto p = temp_path("rwkv.gguf");
        w.write(p);
        auto r = run_strata("generate -m " + p.string() + " -p hi");
        check_clean_failure(r, "'rwkv6' is not supported");
        CHECK_THAT(r.err, Catch::Contains("llama, mistral, qwen2"));
    }
}

TEST_CASE("CLI: prompts that cannot run", "[unit][cli]") {
    const std::filesystem::path path = tiny_llama_path();
    const std::string m = "-m " + path.string();
    SECTION("empty prompt") { check_clean_failure(run_strata("generate " + m + " -p ''"), "the prompt is empty"); }
    SECTION("prompt longer than the context") {
        std::string long_prompt;
        for (int i = 0; i < 200; ++i) long_prompt += "Once upon a time ";
        auto r = run_strata("generate " + m + " --ctx 64 -p '" + long_prompt + "'");
        check_clean_failure(r, "the context holds 64");
        CHECK_THAT(r.err, Catch::Contains("--ctx"));
    }
    SECTION("a draft model that is not there") {
        auto r = run_strata("generate " + m + " -p hi -n 2 --spec draft --draft-model /nonexistent/draft.gguf");
        check_clean_failure(r, "--draft-model /nonexistent/draft.gguf: cannot open model file");
        CHECK_THAT(r.err, Catch::Contains("hint: give a GGUF model") && !Catch::Contains("without -m"));
    }
    SECTION("more threads than the machine has: a warning, and the run goes on") {
        const std::string t = std::to_string(std::max(1u, std::thread::hardware_concurrency()) + 1);
        auto r = run_strata("generate " + m + " -p hi -n 2 --temp 0 -t " + t);
        CHECK(r.exit_code == 0);
        CHECK_THAT(r.err, Catch::Contains("-t " + t + " is more threads than this machine's"));
    }
}

TEST_CASE("CLI: --kv-type takes the KV cache types only", "[unit][cli]") {
    const std::filesystem::path path = tiny_llama_path();
    const std::string m = "-m " + path.string() + " -p hi -n 2 --temp 0";
    auto r = run_strata("generate " + m + " --kv-type q4_k");
    check_clean_failure(r, "--kv-type 'q4_k' is not a KV cache type");
    CHECK_THAT(r.err, Catch::Contains("f32, f16, bf16, q8_0, q4_0"));
    check_clean_failure(run_strata("generate " + m + " --kv-type half"), "--kv-type 'half'");
    for (const char* type : {"f32", "F16", "bf16", "q8_0", "q4_0"}) {
        INFO(type);
        CHECK(run_strata(std::string("generate ") + m + " --kv-type " + type).exit_code == 0);
    }
}
