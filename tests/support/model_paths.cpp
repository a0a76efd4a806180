#include "tests/support/model_paths.h"

#include <cstdlib>

#include <nlohmann/json.hpp>

#include "core/model_paths.h"
#include "tests/support/fixtures.h"
#include "tests/support/gguf_writer.h"
#include "tests/support/tiny_model.h"

namespace strata::test {

std::optional<std::filesystem::path> default_model_path() {
    auto p = strata::default_model_path();
    return std::filesystem::exists(p) ? std::optional(p) : std::nullopt;
}

std::filesystem::path shared_dir() {
    if (const char* s = std::getenv("STRATA_SHARED"); s && *s) return s;
    return (std::filesystem::path(STRATA_SOURCE_DIR) / ".." / "shared").lexically_normal();
}

std::optional<std::filesystem::path> stories260k_path() {
    // The shared folder's, else the one scripts/fetch_model.sh fetched beside the default model.
    for (const auto& p : {shared_dir() / "models" / "stories260K.gguf", strata::default_model_path().parent_path() / "stories260K.gguf"})
        if (std::filesystem::exists(p)) return p.lexically_normal();
    return std::nullopt;
}

std::filesystem::path tiny_llama_path() {
    if (auto real = stories260k_path()) return *real;
    static const std::filesystem::path standin = [] {
        const nlohmann::json h = nlohmann::json::parse(read_fixture_bytes("tokenizer_vocab_stories260k.json"))["header"];
        nlohmann::json c = with_vocabulary(
            tiny_config("llama", h["llama.embedding_length"], h["llama.block_count"], h["llama.feed_forward_length"]));
        c["n_head"] = h["llama.attention.head_count"];
        c["n_head_kv"] = h["llama.attention.head_count_kv"];
        c["n_rot"] = h["llama.rope.dimension_count"];
        c["n_ctx_train"] = h["llama.context_length"];
        c["tied"] = false;  // stories260K carries output.weight (a copy of the embeddings)
        const auto path = temp_path("stories260K-standin.gguf");
        write_tiny_model(c, 20261122, 1e-5f, path);  // make_arch_fixtures.py's seed: the Python stand-in's weights
        return path;
    }();
    return standin;
}

std::filesystem::path strata_binary() { return std::filesystem::path(STRATA_BINARY_DIR) / "strata"; }

}  // namespace strata::test
