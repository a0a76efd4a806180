// Chat templates: family detection from arbitrary template text (read from a GGUF file, as
// the runtime reads it), then rendering arbitrary messages and tokenizing the result with
// special tokens parsed. Nothing may crash. Input: byte 0 holds the flags (bit 0
// add_generation_prompt; bits 1-3 an override name: 0 none, 1-5 a family, 6 an unknown name),
// then NUL-separated fields: the template text, then role and content pairs.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "models/chat_prompt.h"
#include "models/chat_template.h"
#include "models/gguf_file.h"
#include "models/tokenizer.h"
#include "tests/fuzz/fuzz_support.h"
#include "tests/support/gguf_writer.h"

namespace {

std::unique_ptr<strata::models::Tokenizer> g_tok;

std::vector<std::string> split_nul(std::string_view s) {
    std::vector<std::string> out;
    for (size_t a = 0;;) {
        const size_t b = s.find('\0', a);
        out.emplace_back(s.substr(a, b == std::string_view::npos ? std::string_view::npos : b - a));
        if (b == std::string_view::npos) return out;
        a = b + 1;
    }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    strata::fuzz::quiet_logging();
    if (auto p = strata::fuzz::bpe_model_path())
        g_tok = strata::models::Tokenizer::from_gguf(strata::models::GgufFile::open(*p, /*map_data=*/false));
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace strata;
    if (size == 0) return 0;
    const bool add_generation_prompt = data[0] & 1;
    const int override_index = (data[0] >> 1) & 7;
    static constexpr std::string_view kOverrides[] = {"", "chatml", "llama3", "llama2", "zephyr", "gemma", "nope", ""};
    const auto fields = split_nul(std::string_view(reinterpret_cast<const char*>(data + 1), size - 1));

    const auto bytes = test::GgufWriter().kv_string("tokenizer.chat_template", fields[0]).bytes();
    const strata::models::GgufFile f = strata::models::GgufFile::open(fuzz::write_scratch(bytes.data(), bytes.size()), /*map_data=*/false);
    std::vector<strata::models::ChatMessage> messages;
    for (size_t i = 1; i + 1 < fields.size(); i += 2) messages.push_back({fields[i], fields[i + 1]});
    try {
        const strata::models::ChatTemplate tmpl = strata::models::ChatTemplate::from_gguf(f, kOverrides[override_index]);
        const std::string text = tmpl.render(messages, add_generation_prompt);
        (void)tmpl.end_of_turn();
        if (g_tok) (void)strata::models::tokenize_chat(*g_tok, tmpl, messages, add_generation_prompt);
    } catch (const UsageError&) {
        if (override_index != 6) throw;  // only the unknown name may be refused
    }
    return 0;
}
