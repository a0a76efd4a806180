// The architecture table: every name Strata runs maps to its row and back; others are refused.
#include <catch2/catch.hpp>

#include "models/arch.h"

using namespace strata::models;

TEST_CASE("arch: names round-trip through the table; others are not found", "[unit][hparams]") {
    for (const char* name : {"llama", "mistral", "qwen2", "qwen3", "qwen3moe", "gemma2", "gemma3", "phi3", "deepseek2", "gpt-oss"}) {
        const auto t = find_arch(name);
        REQUIRE(t);
        CHECK(arch_name(t->arch) == name);
    }
    CHECK_FALSE(find_arch("mamba"));
    CHECK_FALSE(find_arch("deepseek"));  // the first DeepSeek's architecture is another
}
