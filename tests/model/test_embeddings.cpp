// Embeddings of SmolLM2 through the scheduler, against the numpy reference's pooled final hidden
// states (tests/fixtures/model/smollm2_embeddings.json, tests/reference/make_embedding_fixtures.py):
// last-token, mean and first-token pooling, inputs of one block, several, and more than a pass;
// the same vector alone or batched with generating sequences, and with its prefix cached.
#include <catch2/catch.hpp>

#include <cmath>
#include <condition_variable>
#include <mutex>

#include "runtime/engine.h"
#include "runtime/scheduler.h"
#include "tests/support/engine_options.h"
#include "tests/support/fixtures.h"
#include "tests/support/model_paths.h"

using namespace strata;
using namespace strata::runtime;

namespace {

// Submits every request at once and waits for all of them.
std::vector<GenerateResult> run_all(Scheduler& s, std::vector<Request> requests) {
    std::vector<GenerateResult> out(requests.size());
    std::mutex mu;
    std::condition_variable cv;
    size_t done = 0;
    for (size_t i = 0; i < requests.size(); ++i) {
        requests[i].on_done = [&, i](const GenerateResult& r) {
            std::lock_guard lock(mu);
            out[i] = r;
            ++done;
            cv.notify_all();
        };
        s.submit(std::move(requests[i]));
    }
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return done == out.size(); });
    return out;
}

Request embed(const std::vector<int32_t>& ids, Pooling how) {
    Request r;
    r.prompt = ids;
    r.params.n_predict = 0;
    r.embed = how;
    return r;
}

double cosine(const std::vector<float>& a, const nlohmann::json& b) {
    double dot = 0, na = 0, nb = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        const double y = b[i].get<double>();
        dot += a[i] * y;
        na += double(a[i]) * a[i];
        nb += y * y;
    }
    return dot / std::sqrt(na * nb);
}

}  // namespace

TEST_CASE("SmolLM2 embeddings equal the reference's pooled final hidden states", "[model][embeddings]") {
    const auto path = test::default_model_path();
    STRATA_REQUIRE_MODEL(path, "SmolLM2-135M-Instruct.Q4_1.gguf");
    const nlohmann::json fx = test::model_fixture("smollm2_embeddings.json");
    Engine engine(test::engine_options(*path, 1024));
    CHECK(engine.pooling() == Pooling::Last);  // SmolLM2's metadata names none: a decoder pools its last token
    Scheduler scheduler(engine, SchedulerOptions{4, 16});
    std::vector<Request> requests;
    const std::pair<Pooling, const char*> poolings[] = {{Pooling::Last, "last"}, {Pooling::Mean, "mean"}, {Pooling::First, "first"}};
    for (const auto& c : fx["cases"])
        for (const auto& [how, key] : poolings) requests.push_back(embed(c["ids"].get<std::vector<int32_t>>(), how));
    const std::vector<GenerateResult> got = run_all(scheduler, std::move(requests));
    size_t i = 0;
    for (const auto& c : fx["cases"])
        for (const auto& [how, key] : poolings) {
            const GenerateResult& r = got[i++];
            INFO(c["ids"].size() << " tokens, " << key << " pooling");
            REQUIRE(r.stop_reason == "stop");
            REQUIRE(r.embedding.size() == c[key].size());
            double norm = 0;
            for (float v : r.embedding) norm += double(v) * v;
            CHECK(norm == Approx(1.0).epsilon(1e-5));
            // Q4_1 weights dequantized as the reference does, two-level int8 activations and an
            // f16 KV cache against float64: 1 - cosine was below 1e-7 when this was written.
            CHECK(cosine(r.embedding, c[key]) > 1 - 1e-5);
            CHECK(r.prompt_tokens.size() == c["ids"].size());
            CHECK(r.tokens.empty());
        }
}

TEST_CASE("SmolLM2 embeddings do not depend on the sequences beside them or on a cached prefix", "[model][embeddings]") {
    const auto path = test::default_model_path();
    STRATA_REQUIRE_MODEL(path, "SmolLM2-135M-Instruct.Q4_1.gguf");
    const nlohmann::json fx = test::model_fixture("smollm2_embeddings.json");
    const auto ids = fx["cases"][1]["ids"].get<std::vector<int32_t>>();  // 17 tokens: one full block
    Engine engine(test::engine_options(*path, 1024));
    Scheduler scheduler(engine, SchedulerOptions{4, 16});
    const std::vector<float> alone = run_all(scheduler, [&] {
        std::vector<Request> v;
        v.push_back(embed(ids, Pooling::Mean));
        return v;
    }())[0].embedding;
    // Beside generating sequences (prompt chunks and decode steps in the same passes) and
    // after the same prompt's blocks were cached (last pooling attaches them).
    std::vector<Request> mixed;
    for (int k = 0; k < 2; ++k) {
        Request g;
        g.prompt = {504, 2365, 6354, 16438};
        g.params.n_predict = 8;
        g.params.sampler.temperature = 0;
        mixed.push_back(std::move(g));
    }
    mixed.push_back(embed(ids, Pooling::Mean));
    mixed.push_back(embed(ids, Pooling::Last));
    const std::vector<GenerateResult> got = run_all(scheduler, std::move(mixed));
    CHECK(got[2].embedding == alone);
    const std::vector<float> last_first = got[3].embedding;
    const GenerateResult cached = run_all(scheduler, [&] {
        std::vector<Request> v;
        v.push_back(embed(ids, Pooling::Last));
        return v;
    }())[0];
    CHECK(cached.cached_tokens == 16);
    CHECK(cached.embedding == last_first);
}
