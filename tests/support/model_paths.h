#pragma once
// Model files used by tests. Each is optional: tests that need one skip (with a warning)
// where it is absent, for instance in a clone without ../shared or before the model fetch.
#include <filesystem>
#include <optional>

#include "tests/support/skip.h"

namespace strata::test {

// SmolLM2-135M-Instruct Q4_1 in the model cache (fetched by scripts/fetch_model.sh).
std::optional<std::filesystem::path> default_model_path();
// ../shared/models/stories260K.gguf beside the repository.
std::optional<std::filesystem::path> stories260k_path();
// The strata binary of this build.
std::filesystem::path strata_binary();

}  // namespace strata::test

// Skips the current test case (tests/support/skip.h) when `opt_path` is empty.
#define STRATA_REQUIRE_MODEL(opt_path, what)                  \
    do {                                                      \
        if (!(opt_path)) STRATA_SKIP(what " not found");      \
    } while (0)
