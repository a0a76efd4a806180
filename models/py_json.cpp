#include "models/py_json.h"

#include <nlohmann/json.hpp>

namespace strata::models {

namespace {
void write(const nlohmann::ordered_json& v, int indent, int depth, std::string& out) {
    const bool nested = v.is_object() || v.is_array();
    if (!nested || v.empty()) {
        out += v.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
        return;
    }
    const std::string pad = indent >= 0 ? "\n" + std::string(size_t(indent) * (depth + 1), ' ') : "";
    out += v.is_object() ? '{' : '[';
    bool first = true;
    for (auto it = v.begin(); it != v.end(); ++it) {
        out += first ? pad : (indent >= 0 ? "," + pad : ", ");
        first = false;
        if (v.is_object()) {
            out += nlohmann::ordered_json(it.key()).dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
            out += ": ";
        }
        write(*it, indent, depth + 1, out);
    }
    if (indent >= 0) out += "\n" + std::string(size_t(indent) * depth, ' ');
    out += v.is_object() ? '}' : ']';
}
}  // namespace

std::string py_json(const nlohmann::ordered_json& value, int indent) {
    std::string out;
    write(value, indent, 0, out);
    return out;
}

}  // namespace strata::models
