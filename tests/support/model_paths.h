#pragma once
// Model files used by tests. The real models are optional: tests that need one skip (with a
// warning) where it is absent, for instance in a clone without the shared folder or before the
// model fetch; tiny_llama_path() is always there.
#include <filesystem>
#include <optional>

#include "tests/support/skip.h"

namespace strata::test {

// SmolLM2-135M-Instruct Q4_1 in the model cache (fetched by scripts/fetch_model.sh).
std::optional<std::filesystem::path> default_model_path();
// The shared folder beside the repository: $STRATA_SHARED, else ../shared.
std::filesystem::path shared_dir();
// stories260K.gguf in the shared folder's models/, else in the model cache (scripts/fetch_model.sh
// fetches it there): for tests that assert its trained outputs.
std::optional<std::filesystem::path> stories260k_path();
// stories260K when it is there, else a stand-in the process writes once: its shape, header and
// SentencePiece vocabulary (tests/fixtures/tokenizer_vocab_stories260k.json) with random
// weights, for tests that need a small llama with a tokenizer, not its trained text.
std::filesystem::path tiny_llama_path();
// The strata binary of this build.
std::filesystem::path strata_binary();

}  // namespace strata::test

// Skips the current test case (tests/support/skip.h) when `opt_path` is empty.
#define STRATA_REQUIRE_MODEL(opt_path, what)                  \
    do {                                                      \
        if (!(opt_path)) STRATA_SKIP(what " not found");      \
    } while (0)
