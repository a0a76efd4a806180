#include "models/model_dir.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"
#include "models/gguf_file.h"
#include "models/hparams.h"

namespace strata::models {

LocalModel describe_model(const std::filesystem::path& path) {
    const GgufFile f = GgufFile::open(path, /*map_data=*/false);
    Hparams::from_gguf(f);  // an architecture or shape no engine here runs: refused now, not at its first request
    LocalModel m;
    m.id = path.stem().string();
    m.alias = f.get_string_opt("general.name").value_or("");
    m.path = path;
    m.size_bytes = f.file_size();
    std::error_code ec;
    const auto written = std::filesystem::last_write_time(path, ec);
    if (!ec)
        m.modified = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::file_clock::to_sys(written).time_since_epoch())
                         .count();
    m.architecture = f.get_string_opt("general.architecture").value_or("");
    m.context_length = f.get_int_opt(m.architecture + ".context_length").value_or(0);
    m.embedding_length = f.get_int_opt(m.architecture + ".embedding_length").value_or(0);
    std::map<DType, uint64_t> bytes_by_type;
    for (const TensorInfo& t : f.tensors()) {
        m.parameters += static_cast<uint64_t>(t.nelements());
        if (t.n_dims >= 2) bytes_by_type[t.type] += t.nbytes;  // norms and biases say nothing of the quantization
    }
    const auto top = std::max_element(bytes_by_type.begin(), bytes_by_type.end(),
                                      [](const auto& a, const auto& b) { return a.second < b.second; });
    if (top != bytes_by_type.end()) m.quantization = std::string(dtype_name(top->first));
    return m;
}

std::vector<std::filesystem::path> gguf_files(const std::filesystem::path& dir) {
    std::error_code ec;
    std::vector<std::filesystem::path> out;
    std::filesystem::directory_iterator it(dir, ec);
    if (ec)
        throw UsageError(fmt::format("cannot read the models folder '{}': {}", dir.string(), ec.message()),
                         "name a folder of GGUF files with --models-dir, or set $STRATA_MODELS");
    for (std::filesystem::directory_iterator end; it != end; it.increment(ec)) {
        if (ec) break;
        if (it->path().extension() == ".gguf" && it->is_regular_file(ec)) out.push_back(it->path());
    }
    std::sort(out.begin(), out.end());
    return out;
}

std::vector<LocalModel> describe_models(std::span<const std::filesystem::path> files) {
    std::vector<LocalModel> out;
    std::set<std::string> ids;
    for (const auto& path : files) {
        try {
            LocalModel m = describe_model(path);
            if (!ids.insert(m.id).second) {
                STRATA_LOG_WARN("models: '{}' is skipped: a model named '{}' is already served", path.string(), m.id);
                continue;
            }
            out.push_back(std::move(m));
        } catch (const Error& e) {
            STRATA_LOG_WARN("models: '{}' is skipped: {}", path.string(), e.what());
        }
    }
    std::map<std::string, int> claims;
    for (const LocalModel& m : out)
        if (!m.alias.empty()) ++claims[m.alias];
    for (LocalModel& m : out)
        if (!m.alias.empty() && (claims[m.alias] > 1 || ids.count(m.alias) || m.alias == m.id)) m.alias.clear();
    return out;
}

const LocalModel* find_model(std::span<const LocalModel> models, std::string_view name) {
    constexpr std::string_view kLatest = ":latest";
    if (name.size() > kLatest.size() && name.ends_with(kLatest)) name.remove_suffix(kLatest.size());
    for (const LocalModel& m : models)
        if (m.id == name) return &m;
    for (const LocalModel& m : models)
        if (!m.alias.empty() && m.alias == name) return &m;
    return nullptr;
}

std::string parameter_size(uint64_t parameters) {
    if (parameters >= 1000000000ull) return fmt::format("{:.1f}B", parameters / 1e9);
    if (parameters >= 1000000ull) return fmt::format("{}M", (parameters + 500000) / 1000000);
    if (parameters >= 1000ull) return fmt::format("{}K", (parameters + 500) / 1000);
    return fmt::format("{}", parameters);
}

}  // namespace strata::models
