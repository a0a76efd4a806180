// POST /v1/embeddings: each input becomes an embedding request on the same scheduler as the
// completions (its prompt read, its final hidden states pooled), a few at a time so that a
// long list does not fill the queue; and the token endpoints, which need no model pass.
#include <httplib.h>

#include <algorithm>
#include <optional>

#include <nlohmann/json.hpp>

#include "tools/openai/embeddings.h"
#include "tools/openai/tokenize.h"
#include "tools/server/generation.h"
#include "tools/server/in_flight.h"
#include "tools/server/server_state.h"

namespace strata::server {

std::optional<std::vector<runtime::GenerateResult>> run_embeddings(ServerState& state, const std::shared_ptr<LoadedModel>& model,
                                                                  const openai::EmbeddingRequest& ereq, const std::string& client) {
    const size_t n = ereq.inputs.size();
    std::vector<runtime::GenerateResult> results(n);
    const size_t window = static_cast<size_t>(std::max(1, model->scheduler->options().max_batch));
    for (size_t first = 0; first < n; first += window) {
        const size_t count = std::min(window, n - first);
        auto gen = std::make_shared<Generation>(static_cast<int>(count));
        std::vector<runtime::Request> requests;
        for (size_t i = 0; i < count; ++i) {
            runtime::GenerateParams params;
            params.n_predict = 0;
            runtime::Request r = Generation::request(gen, static_cast<int>(i), ereq.inputs[first + i], params);
            r.embed = model->context.pooling;
            requests.push_back(std::move(r));
        }
        const std::shared_ptr<InFlight> flight = submit_all(state, model, std::move(requests), /*share_prompt=*/false, client);
        if (!flight->await_all(*gen)) return std::nullopt;
        const std::vector<runtime::GenerateResult> done = gen->results();
        for (size_t i = 0; i < count; ++i) {
            if (done[i].stop_reason != "stop")
                throw openai::ApiError(done[i].stop_reason == "cancelled" ? 503 : 500,
                                       "the embedding failed: " + (done[i].error.empty() ? done[i].stop_reason : done[i].error),
                                       "server_error");
            results[first + i] = done[i];
        }
    }
    return results;
}

void handle_embeddings(ServerState& state, const httplib::Request& req, httplib::Response& res) {
    try {
        const openai::Json body = openai::parse_json_limited(req.body, "the request body", "invalid_json");
        const std::shared_ptr<LoadedModel> model = requested_model(state, body);
        const openai::EmbeddingRequest ereq = openai::embedding_request(body, model->context);
        const auto results = run_embeddings(state, model, ereq, req.remote_addr);
        if (!results) {
            res.status = 499;  // the client left
            return;
        }
        res.set_content(openai::dump(openai::embedding_json(ereq, *results)), "application/json");
    } catch (const openai::ApiError& e) {
        set_error(res, e);
    }
}

namespace {
// A route whose answer is a function of the body and the model it names (the default one when it names none).
template <class Answer>
void answer(ServerState& state, const httplib::Request& req, httplib::Response& res, Answer f) {
    try {
        const openai::Json body = openai::parse_json_limited(req.body, "the request body", "invalid_json");
        res.set_content(openai::dump(f(body, requested_model(state, body)->context)), "application/json");
    } catch (const openai::ApiError& e) {
        set_error(res, e);
    }
}
}  // namespace

void handle_tokenize(ServerState& state, const httplib::Request& req, httplib::Response& res) {
    answer(state, req, res, openai::tokenize_json);
}

void handle_detokenize(ServerState& state, const httplib::Request& req, httplib::Response& res) {
    answer(state, req, res, openai::detokenize_json);
}

void handle_apply_template(ServerState& state, const httplib::Request& req, httplib::Response& res) {
    answer(state, req, res, openai::apply_template_json);
}

}  // namespace strata::server
