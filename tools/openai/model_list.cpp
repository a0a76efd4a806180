#include "tools/openai/model_list.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace strata::openai {

ApiError model_not_found(std::string_view name) {
    return ApiError(404, fmt::format("the model '{}' does not exist; GET /v1/models lists the models this server has", name),
                    "invalid_request_error", "model", "model_not_found");
}

Json model_json(const models::LocalModel& m, std::optional<int> n_ctx) {
    Json meta = {{"size", m.size_bytes},
                 {"architecture", m.architecture},
                 {"quantization", m.quantization},
                 {"parameters", m.parameters},
                 {"context_length", m.context_length},
                 {"n_embd", m.embedding_length},
                 {"aliases", m.alias.empty() ? Json::array() : Json::array({m.alias})},
                 {"loaded", n_ctx.has_value()}};
    if (n_ctx) meta["n_ctx"] = *n_ctx;
    return {{"id", m.id}, {"object", "model"}, {"created", m.modified}, {"owned_by", "strata"}, {"meta", std::move(meta)}};
}

Json model_list_json(std::span<const models::LocalModel> models,
                     const std::function<std::optional<int>(const models::LocalModel&)>& n_ctx_of) {
    Json data = Json::array();
    for (const models::LocalModel& m : models) data.push_back(model_json(m, n_ctx_of(m)));
    return {{"object", "list"}, {"data", std::move(data)}};
}

}  // namespace strata::openai
