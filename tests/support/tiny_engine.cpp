#include "tests/support/tiny_engine.h"

#include "tests/support/gguf_writer.h"
#include "tests/support/planned.h"
#include "tests/support/tiny_model.h"

namespace strata::test {

namespace {
std::filesystem::path written(const std::string& name, const nlohmann::json& config, uint64_t seed) {
    auto path = temp_path(name);
    write_tiny_model(config, seed, 1e-5f, path);
    return path;
}
}  // namespace

TinyModelFile::TinyModelFile(const std::string& name, const nlohmann::json& config, uint64_t seed)
    : path(written(name, config, seed)), file(GgufFile::open(path)), hp(Hparams::from_gguf(file)) {}

TinyForward::TinyForward(const std::string& name, const nlohmann::json& config, uint64_t seed)
    : TinyModelFile(name, config, seed), store(file, hp, unlimited, 0, 2, planned(file)), fwd(hp, store) {}

}  // namespace strata::test
