#include "tools/openai/api_error.h"

#include <nlohmann/json.hpp>

namespace strata::openai {

nlohmann::json ApiError::to_json() const {
    const auto or_null = [](const std::string& s) { return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s); };
    return {{"error", {{"message", what()}, {"type", type_}, {"param", or_null(param_)}, {"code", or_null(code_)}}}};
}

ApiError invalid_request(std::string message, std::string param, std::string code) {
    return ApiError(400, std::move(message), "invalid_request_error", std::move(param), std::move(code));
}

}  // namespace strata::openai
