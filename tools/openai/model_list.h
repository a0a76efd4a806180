#pragma once
// The models a server has, in OpenAI's shape (GET /v1/models and /v1/models/{id}) and as
// `strata list --json` prints them: {"id", "object": "model", "created", "owned_by", "meta"},
// where meta holds what a client choosing a model wants to know: file size, architecture,
// quantization, parameters, trained context, the alias it also answers to, and for a loaded
// model the context it runs.
#include <functional>
#include <optional>
#include <span>
#include <string_view>

#include "models/model_dir.h"
#include "tools/openai/api_error.h"
#include "tools/openai/json_fields.h"

namespace strata::openai {

// 404 model_not_found naming what the request asked for.
ApiError model_not_found(std::string_view name);
// `n_ctx`: the context the model runs, when it is loaded.
Json model_json(const models::LocalModel& m, std::optional<int> n_ctx = {});
// {"object": "list", "data": [...]}; `n_ctx_of` gives a model's running context when it is loaded.
Json model_list_json(std::span<const models::LocalModel> models,
                     const std::function<std::optional<int>(const models::LocalModel&)>& n_ctx_of);

}  // namespace strata::openai
