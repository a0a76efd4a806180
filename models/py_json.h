#pragma once
// JSON text as the chat templates' `tojson` writes it (Hugging Face's, which is Python's
// json.dumps with ensure_ascii off): ", " and ": " between items, or `indent` spaces per level
// with "," ending lines; keys in their given order; non-ASCII characters as they are.
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace strata::models {

std::string py_json(const nlohmann::ordered_json& value, int indent = -1);

}  // namespace strata::models
