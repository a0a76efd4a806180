// `strata inspect`: a GGUF file's metadata and tensor table, read from the header only.
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <variant>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/model_paths.h"
#include "models/gguf_file.h"
#include "tools/cli_options.h"
#include "tools/terminal_text.h"

namespace strata::cli {

namespace {
// Arrays longer than this show their first items (the vocabulary runs to 100k strings).
constexpr size_t kArrayItems = 16;

// A metadata value as JSON data: numbers, booleans and whole strings as they are; an array as
// {"type", "count", "items"}, the items its first kArrayItems.
nlohmann::json value_json(const models::GgufValue& value) {
    return std::visit(
        [&](const auto& x) -> nlohmann::json {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, std::shared_ptr<models::GgufArray>>) {
                nlohmann::json items = nlohmann::json::array();
                for (size_t i = 0; i < x->items.size() && i < kArrayItems; ++i) items.push_back(value_json(x->items[i]));
                return {{"type", models::gguf_type_name(x->elem_type)}, {"count", x->items.size()}, {"items", items}};
            } else if constexpr (std::is_same_v<T, double>) {
                // An f32 as its shortest decimal (1e-05, not the double nearest the float).
                return value.type == models::GgufType::F32 ? nlohmann::json(std::stod(fmt::format("{}", static_cast<float>(x))))
                                                          : nlohmann::json(x);
            } else {
                return x;
            }
        },
        value.v);
}

std::string shape_of(const models::TensorInfo& t) {
    std::string s;
    for (int d = 0; d < t.n_dims; ++d) s += (d ? " x " : "") + std::to_string(t.ne[d]);
    return s;
}
}  // namespace

int run_inspect(const InspectOptions& o) {
    const auto f = models::GgufFile::open(resolve_model_path(o.model), /*map_data=*/false);
    uint64_t total = 0, params = 0;
    for (const auto& t : f.tensors()) total += t.nbytes, params += static_cast<uint64_t>(t.nelements());

    if (o.json) {
        nlohmann::json meta = nlohmann::json::object(), tensors = nlohmann::json::array();
        for (const auto& [k, v] : f.metadata()) meta[k] = value_json(v);
        for (const auto& t : f.tensors())
            tensors.push_back({{"name", t.name}, {"type", dtype_name(t.type)}, {"shape", std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims)},
                               {"offset", f.file_offset(t)}, {"bytes", t.nbytes}});
        nlohmann::json j = {{"path", f.path().string()}, {"version", f.version()}, {"metadata", meta},
                            {"tensors", tensors}, {"total_bytes", total}, {"parameters", params}};
        std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
        return 0;
    }
    fmt::print("{}: GGUF v{}, {} metadata keys, {} tensors, {:.2f} MiB, {:.1f} M parameters\n\n", f.path().string(),
               f.version(), f.metadata().size(), f.tensors().size(), total / 1048576.0, params / 1e6);
    // A file's text is shown, never obeyed: its control bytes would move the terminal's cursor or forge rows.
    for (const auto& [k, v] : f.metadata())
        fmt::print("{:<42} {:<7} {}\n", terminal_safe(k, true), models::gguf_type_name(v.type), terminal_safe(v.to_display(), true));
    fmt::print("\n{:<36} {:<6} {:<20} {:>12}\n", "tensor", "type", "shape", "bytes");
    for (const auto& t : f.tensors())
        fmt::print("{:<36} {:<6} {:<20} {:>12}\n", terminal_safe(t.name, true), dtype_name(t.type), shape_of(t), t.nbytes);
    return 0;
}

}  // namespace strata::cli
