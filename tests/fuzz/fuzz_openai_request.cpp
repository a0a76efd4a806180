// OpenAI request bodies (`strata serve`, `strata batch`): parse_completion_request on
// arbitrary text, with SmolLM2's tokenizer and chat template, must either give a request
// whose prompt fits the context or throw a 400 ApiError. The first input byte picks the
// endpoint (bit 0: /v1/completions, else /v1/chat/completions); the rest is the body.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string_view>

#include "models/chat_template.h"
#include "models/gguf_file.h"
#include "models/tokenizer.h"
#include "tests/fuzz/fuzz_support.h"
#include "tools/openai/api_error.h"
#include "tools/openai/request.h"

namespace {

constexpr int kCtx = 2048;
std::unique_ptr<strata::models::Tokenizer> g_tok;
std::optional<strata::models::ChatTemplate> g_tmpl;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    strata::fuzz::quiet_logging();
    const auto path = strata::fuzz::bpe_model_path();
    if (!path) {
        std::fprintf(stderr, "fuzz_openai_request: the default model is missing (set STRATA_FUZZ_MODEL)\n");
        std::exit(1);
    }
    const auto f = strata::models::GgufFile::open(*path, /*map_data=*/false);
    g_tok = strata::models::Tokenizer::from_gguf(f);
    g_tmpl = strata::models::ChatTemplate::from_gguf(f);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace strata::openai;
    if (size == 0) return 0;
    const Endpoint endpoint = data[0] & 1 ? Endpoint::Completions : Endpoint::Chat;
    const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
    const ModelContext model{*g_tok, *g_tmpl, kCtx, "smollm2"};
    try {
        const CompletionRequest req = parse_completion_request(endpoint, body, model);
        if (req.prompt.empty() || req.prompt.size() >= static_cast<size_t>(kCtx)) {
            std::fprintf(stderr, "accepted a request whose prompt has %zu tokens (context %d)\n", req.prompt.size(), kCtx);
            std::abort();
        }
        for (int32_t id : req.prompt)
            if (id < 0 || id >= g_tok->n_vocab()) std::abort();
    } catch (const ApiError& e) {
        if (e.status() < 400 || e.status() >= 500) std::abort();  // a bad body is the client's error
    }
    return 0;
}
