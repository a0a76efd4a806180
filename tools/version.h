#pragma once
// Strata's version, as `strata --version` and Ollama's GET /api/version report it.
namespace strata {
inline constexpr const char* kVersion = "0.1.0";
}
