// `strata inspect`: a GGUF file's metadata and tensor table, read from the header only.
#include <cstdio>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/model_paths.h"
#include "models/gguf_file.h"
#include "tools/cli_options.h"

namespace strata::cli {

namespace {
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
        for (const auto& [k, v] : f.metadata()) meta[k] = v.to_display(16);
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
    for (const auto& [k, v] : f.metadata()) fmt::print("{:<42} {:<7} {}\n", k, models::gguf_type_name(v.type), v.to_display());
    fmt::print("\n{:<36} {:<6} {:<20} {:>12}\n", "tensor", "type", "shape", "bytes");
    for (const auto& t : f.tensors()) fmt::print("{:<36} {:<6} {:<20} {:>12}\n", t.name, dtype_name(t.type), shape_of(t), t.nbytes);
    return 0;
}

}  // namespace strata::cli
