#pragma once
// The GGUF files of a folder, each described from its header alone (no weight is read): what
// `strata list`, `/v1/models` and Ollama's `/api/tags` show, and the names a request may give
// a model by: the file's stem, or the `general.name` it carries when no other file claims it.
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace strata::models {

struct LocalModel {
    std::string id;              // the file's stem
    std::string alias;           // general.name, unless another file claims it too; else empty
    std::filesystem::path path;
    uint64_t size_bytes = 0;     // the file
    int64_t modified = 0;        // Unix seconds
    std::string architecture;    // general.architecture
    std::string quantization;    // the weight type holding the most bytes ("Q4_1")
    uint64_t parameters = 0;
    int64_t context_length = 0;  // the context it was trained for; 0 when the file does not say
    int64_t embedding_length = 0;
};

// Throws FormatError or IoError, as GgufFile::open and Hparams::from_gguf do, for a file that is
// not a model this engine runs (an architecture it does not know included).
LocalModel describe_model(const std::filesystem::path& path);
// The *.gguf files directly in `dir`, sorted; throws UsageError naming a folder that cannot be read.
std::vector<std::filesystem::path> gguf_files(const std::filesystem::path& dir);
// Each file described, by id; a file that is not a readable model, or whose id an earlier one
// took, is skipped with a warning. Aliases that two models claim, or that are another's id,
// are dropped.
std::vector<LocalModel> describe_models(std::span<const std::filesystem::path> files);
// The model `name` names: its id or alias, either with Ollama's ":latest" tag; nullptr for none.
const LocalModel* find_model(std::span<const LocalModel> models, std::string_view name);
// "135M", "8.0B": a parameter count as Ollama's parameter_size writes it.
std::string parameter_size(uint64_t parameters);

}  // namespace strata::models
