// GET /v1/models and /v1/models/{id}: every model the server answers for, loaded or not, in
// OpenAI's shape with what a client choosing one wants to know (tools/openai/model_list.h).
#include <httplib.h>

#include <optional>

#include <nlohmann/json.hpp>

#include "tools/openai/model_list.h"
#include "tools/server/server_state.h"

namespace strata::server {

namespace {
// The context each loaded model runs, by id.
std::function<std::optional<int>(const models::LocalModel&)> running_context(const ModelRegistry& models) {
    std::map<std::string, int> n_ctx;
    for (const ModelRegistry::Loaded& l : models.loaded()) n_ctx[l.model->info.id] = l.model->engine->n_ctx();
    return [n_ctx](const models::LocalModel& m) -> std::optional<int> {
        const auto it = n_ctx.find(m.id);
        return it == n_ctx.end() ? std::nullopt : std::optional(it->second);
    };
}
}  // namespace

void handle_models(ServerState& state, httplib::Response& res) {
    res.set_content(openai::dump(openai::model_list_json(state.models.available(), running_context(state.models))), "application/json");
}

void handle_model(ServerState& state, const std::string& id, httplib::Response& res) {
    const models::LocalModel* m = state.models.find(id);
    if (!m || id.empty())
        return set_error(res, openai::model_not_found(id));
    res.set_content(openai::dump(openai::model_json(*m, running_context(state.models)(*m))), "application/json");
}

}  // namespace strata::server
