// The real SmolLM2-135M-Instruct (Q4_1) against the independent numpy reference
// (tests/reference/reference_forward.py) whose outputs are committed as fixtures.
#include <catch2/catch.hpp>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "cpu/onednn_matmul.h"
#include "runtime/engine.h"
#include "tests/support/engine_options.h"
#include "tests/support/fixtures.h"
#include "tests/support/generate.h"
#include "tests/support/model_paths.h"
#include "tests/support/run_command.h"
#include "tests/support/skip.h"

using namespace strata;
using namespace strata::runtime;
using nlohmann::json;

namespace {
std::string shell_quote(const std::string& s) {
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}
}  // namespace

// Positions of the teacher-forced fixture where the engine's argmax is the reference's.
static std::pair<int, int> teacher_forced_agreement(const EngineOptions& opts) {
    Engine engine(opts);
    const int n_vocab = engine.hparams().n_vocab;
    int agree = 0, total = 0;
    const json f = test::model_fixture("smollm2_teacher_forced.json");
    for (const auto& p : f["prompts"]) {
        const auto ids = p["ids"].get<std::vector<int32_t>>();
        const auto argmax = p["argmax"].get<std::vector<int32_t>>();
        const auto logits = test::prompt_logits(engine, ids);
        for (size_t i = 0; i < ids.size(); ++i) {
            const float* row = &logits[i * n_vocab];
            const int32_t top = static_cast<int32_t>(std::max_element(row, row + n_vocab) - row);
            agree += top == argmax[i];
            ++total;
        }
    }
    return {agree, total};
}

TEST_CASE("SmolLM2: teacher-forced top-1 agrees with the reference on >= 99% of positions", "[model]") {
    auto path = test::default_model_path();
    STRATA_REQUIRE_MODEL(path, "the default SmolLM2 model (run scripts/fetch_model.sh)");
    const auto [agree, total] = teacher_forced_agreement(test::engine_options(*path, 512));
    INFO(agree << " of " << total << " positions agree");
    CHECK(total == 384);
    CHECK(agree >= 0.99 * total);
}

TEST_CASE("SmolLM2: --int8-acts (single-level int8 activations) keeps >= 95% top-1 agreement", "[model]") {
    auto path = test::default_model_path();
    STRATA_REQUIRE_MODEL(path, "the default SmolLM2 model (run scripts/fetch_model.sh)");
    EngineOptions opts = test::engine_options(*path, 512);
    opts.int8_activations = true;
    const auto [agree, total] = teacher_forced_agreement(opts);
    INFO(agree << " of " << total << " positions agree");
    CHECK(total == 384);
    CHECK(agree >= 0.95 * total);
}

TEST_CASE("SmolLM2: --bf16-prefill (oneDNN bf16 prompt matmuls) keeps >= 99% top-1 agreement", "[model]") {
    auto path = test::default_model_path();
    STRATA_REQUIRE_MODEL(path, "the default SmolLM2 model (run scripts/fetch_model.sh)");
    if (!cpu::bf16_prefill_usable(DType::Q4_1)) STRATA_SKIP("oneDNN runs no bf16 on AMX here");
    EngineOptions opts = test::engine_options(*path, 512);
    opts.bf16_prefill = true;
    const auto [agree, total] = teacher_forced_agreement(opts);
    cpu::set_bf16_prefill(false);  // process-wide: the other tests run the default path
    INFO(agree << " of " << total << " positions agree");
    CHECK(total == 384);
    CHECK(agree >= 0.99 * total);
}

TEST_CASE("SmolLM2: weights tiled at load give the file layout's logits bit for bit", "[model]") {
    auto path = test::default_model_path();
    STRATA_REQUIRE_MODEL(path, "the default SmolLM2 model (run scripts/fetch_model.sh)");
    const json f = test::model_fixture("smollm2_teacher_forced.json");
    const auto ids = f["prompts"][0]["ids"].get<std::vector<int32_t>>();
    auto logits = [&](bool tile) {
        EngineOptions opts = test::engine_options(*path, 512);
        opts.tile_weights = tile;
        Engine engine(opts);
        std::vector<float> prompt = test::prompt_logits(engine, ids);
        const auto step = test::prompt_logits(engine, std::span(ids).first(1));  // a one-row pass: the decode kernels
        prompt.insert(prompt.end(), step.begin(), step.end());
        return prompt;
    };
    const std::vector<float> tiled = logits(true), file = logits(false);
    REQUIRE(tiled.size() == file.size());
    CHECK(tiled == file);
}

TEST_CASE("SmolLM2: `strata generate --json` greedy continuation equals the reference", "[model]") {
    auto path = test::default_model_path();
    STRATA_REQUIRE_MODEL(path, "the default SmolLM2 model (run scripts/fetch_model.sh)");
    const json f = test::model_fixture("smollm2_greedy.json");
    auto r = test::run_strata("generate --json --temp 0 --ignore-eos -n 64 -p " + shell_quote(f["prompt_text"]));
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const json out = json::parse(r.out);
    CHECK(out["prompt_tokens"] == f["prompt_ids"]);
    CHECK(out["tokens"] == f["generated_ids"]);
    CHECK(out["timings"]["decode_tokens_per_s"].get<double>() > 0);
}

TEST_CASE("SmolLM2: perplexity of GPL-3 (4096 tokens) is within 1% of the reference", "[model]") {
    auto path = test::default_model_path();
    STRATA_REQUIRE_MODEL(path, "the default SmolLM2 model (run scripts/fetch_model.sh)");
    const json f = test::model_fixture("smollm2_gpl3_ppl.json");
    const std::string text_file = f["text_file"];
    if (!std::filesystem::exists(text_file)) STRATA_SKIP(text_file << " not found");
    auto r = test::run_strata("perplexity -f " + text_file + " --chunk 512 --max-tokens 4096");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const auto at = r.out.rfind("PPL = ");
    REQUIRE(at != std::string::npos);
    const double ppl = std::stod(r.out.substr(at + 6));
    const double ref = f["ppl_reference"];
    INFO("strata " << ppl << " vs reference " << ref);
    CHECK(std::abs(ppl - ref) / ref < 0.01);
}
