// GGUF reader on arbitrary bytes: header, metadata, tensor table, and everything that builds
// on a parsed file (hyperparameters, tokenizer, chat template, the planner's model shape), as
// a hostile file reaches them. Clear errors (strata::Error) are fine; anything else is a bug.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "models/chat_template.h"
#include "models/gguf_file.h"
#include "models/hparams.h"
#include "models/tokenizer.h"
#include "planner/model_shape.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

template <class F>
void tolerate_errors(F&& f) {
    try {
        f();
    } catch (const strata::Error&) {
    }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    strata::fuzz::quiet_logging();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace strata;
    const auto& path = fuzz::write_scratch(data, size);
    try {
        const strata::models::GgufFile f = strata::models::GgufFile::open(path, /*map_data=*/true);
        for (const auto& [key, value] : f.metadata()) (void)value.to_display();
        for (const auto& t : f.tensors()) (void)f.data(t);
        tolerate_errors([&] { (void)strata::models::Hparams::from_gguf(f); });
        tolerate_errors([&] { (void)planner::ModelShape::from_gguf(f); });
        tolerate_errors([&] { (void)strata::models::ChatTemplate::from_gguf(f).render({{"user", "hi"}}); });
        tolerate_errors([&] {
            const auto tok = strata::models::Tokenizer::from_gguf(f);
            const auto ids = tok->encode("Hello world <|im_start|> <s> 123", tok->add_bos_default(), true);
            (void)tok->decode(ids, true);
        });
    } catch (const Error&) {
    }
    return 0;
}
