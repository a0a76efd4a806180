// `strata list`: the models `strata serve` would serve from a folder (by default the model
// cache), each by the name requests give it, read from the GGUF headers alone.
#include <iostream>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/bytes.h"
#include "core/model_paths.h"
#include "models/model_dir.h"
#include "tools/cli_options.h"
#include "tools/openai/model_list.h"
#include "tools/terminal_text.h"

namespace strata::cli {

int run_list(const ListOptions& o) {
    const std::filesystem::path dir = o.models_dir.empty() ? models_dir() : std::filesystem::path(o.models_dir);
    const auto files = models::gguf_files(dir);
    const std::vector<models::LocalModel> list = models::describe_models(files);
    if (o.json) {
        const auto not_loaded = [](const models::LocalModel&) { return std::optional<int>(); };
        std::cout << openai::dump(openai::model_list_json(list, not_loaded)) << "\n";
        return 0;
    }
    if (list.empty()) {
        fmt::print(stderr, "strata: no GGUF models in {} (scripts/fetch_model.sh fetches the default one)\n", dir.string());
        return 0;
    }
    fmt::print("{:<40} {:<28} {:>10} {:<10} {:<6} {:>8} {:>8}\n", "NAME", "ALIAS", "SIZE", "ARCH", "QUANT", "PARAMS", "CONTEXT");
    for (const models::LocalModel& m : list)
        fmt::print("{:<40} {:<28} {:>10} {:<10} {:<6} {:>8} {:>8}\n", terminal_safe(m.id, true),
                   m.alias.empty() ? "-" : terminal_safe(m.alias, true), format_bytes(m.size_bytes), terminal_safe(m.architecture, true),
                   m.quantization, models::parameter_size(m.parameters), m.context_length);
    return 0;
}

}  // namespace strata::cli
