// POST /v1/embeddings: each input becomes an embedding request on the same scheduler as the
// completions (its prompt read, its final hidden states pooled), a few at a time so that a
// long list does not fill the queue; and the token endpoints, which need no model pass.
#include <httplib.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "tools/openai/embeddings.h"
#include "tools/openai/tokenize.h"
#include "tools/server/generation.h"
#include "tools/server/in_flight.h"
#include "tools/server/server_state.h"

namespace strata::server {

void handle_embeddings(ServerState& state, const httplib::Request& req, httplib::Response& res) {
    openai::EmbeddingRequest ereq;
    try {
        ereq = openai::parse_embedding_request(req.body, state.model);
    } catch (const openai::ApiError& e) {
        return set_error(res, e);
    }
    const size_t n = ereq.inputs.size();
    std::vector<runtime::GenerateResult> results(n);
    const size_t window = static_cast<size_t>(std::max(1, state.scheduler.options().max_batch));
    for (size_t first = 0; first < n; first += window) {
        const size_t count = std::min(window, n - first);
        auto gen = std::make_shared<Generation>(static_cast<int>(count));
        std::vector<runtime::Request> requests;
        for (size_t i = 0; i < count; ++i) {
            runtime::GenerateParams params;
            params.n_predict = 0;
            runtime::Request r = Generation::request(gen, static_cast<int>(i), ereq.inputs[first + i], params);
            r.embed = state.model.pooling;
            requests.push_back(std::move(r));
        }
        std::shared_ptr<InFlight> flight;
        try {
            flight = submit_all(state, std::move(requests), /*share_prompt=*/false, req.remote_addr);
        } catch (const openai::ApiError& e) {
            return set_error(res, e);
        }
        if (!flight->await([&] {
                gen->wait(kPoll);
                return gen->all_done();
            })) {
            res.status = 499;
            return;
        }
        flight->finished();
        const std::vector<runtime::GenerateResult> done = gen->results();
        for (size_t i = 0; i < count; ++i) {
            if (done[i].stop_reason != "stop")
                return set_error(res, openai::ApiError(done[i].stop_reason == "cancelled" ? 503 : 500,
                                                       "the embedding failed: " + (done[i].error.empty() ? done[i].stop_reason : done[i].error),
                                                       "server_error"));
            results[first + i] = done[i];
        }
    }
    res.set_content(openai::dump(openai::embedding_json(ereq, results)), "application/json");
}

namespace {
// A route whose answer is a function of the body alone.
template <class Answer>
void answer(ServerState& state, const httplib::Request& req, httplib::Response& res, Answer f) {
    try {
        res.set_content(openai::dump(f(req.body, state.model)), "application/json");
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
