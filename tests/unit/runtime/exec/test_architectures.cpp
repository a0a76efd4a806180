// Each supported architecture's forward pass against the numpy reference, on tiny
// random-weight F32 models rebuilt from tests/fixtures/model/tiny_arch_logits.json: the
// logits of a prompt (half as a batch, half one token at a time), a greedy continuation, and
// the teacher-forced top-1 of a longer sequence.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "models/gguf_file.h"
#include "models/hparams.h"
#include "runtime/kv/kv_cache.h"
#include "tests/support/fixtures.h"
#include "tests/support/tiny_engine.h"

using namespace strata;
using namespace strata::models;
using namespace strata::runtime;

namespace {
// Below this top-1/top-2 margin the reference's choice is a tie as far as float32 can tell.
constexpr double kTie = 1e-3;

int32_t argmax(std::span<const float> row) {
    return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}
}  // namespace

TEST_CASE("every architecture's forward pass matches the reference", "[unit][arch]") {
    const auto fx = test::model_fixture("tiny_arch_logits.json");
    const auto ids = fx["ids"].get<std::vector<int32_t>>();
    const int n_ctx = fx["n_ctx"];

    for (const auto& m : fx["models"]) {
        const std::string name = m["config"]["name"];
        SECTION(name) {
            test::TinyForward t("tiny_" + name + ".gguf", m["config"], fx["seed"]);
            CHECK(arch_name(t.hp.arch) == m["config"]["arch"].get<std::string>());
            const int64_t V = t.hp.n_vocab;

            // Prefill half as a batch, then the rest one token at a time: both paths are checked.
            KvCache kv(t.hp.n_layer, n_ctx, t.hp.n_embd_kv());
            const std::vector<float> all = t.prompt_then_steps(ids, ids.size() / 2, kv);
            const auto& ref = m["logits"];
            REQUIRE(all.size() == ids.size() * V);
            double max_diff = 0;
            for (size_t i = 0; i < ids.size(); ++i)
                for (int64_t v = 0; v < V; ++v) max_diff = std::max(max_diff, std::abs(all[i * V + v] - ref[i][v].get<double>()));
            INFO(name << ": max |logit - reference| = " << max_diff);
            CHECK(max_diff < 1e-3);

            // Greedy continuation: the reference's tokens, up to its first near-tie.
            const auto want = m["greedy"].get<std::vector<int32_t>>();
            const auto margins = m["greedy_margins"].get<std::vector<double>>();
            std::vector<int32_t> got;
            std::vector<float> logits(all.end() - V, all.end());
            for (size_t i = 0; i < want.size() && margins[i] >= kTie; ++i) {
                got.push_back(argmax(logits));
                t.pool.run([&] { t.fwd.eval({&got.back(), 1}, kv, logits, false); });
            }
            CHECK(got == std::vector<int32_t>(want.begin(), want.begin() + got.size()));
            CHECK(got.size() >= want.size() / 2);

            // Teacher-forced top-1: every position of a longer sequence, in one pass.
            const auto tf = m["teacher_ids"].get<std::vector<int32_t>>();
            const auto top1 = m["teacher_top1"].get<std::vector<int32_t>>();
            const auto tf_margins = m["teacher_margins"].get<std::vector<double>>();
            KvCache kv_tf(t.hp.n_layer, n_ctx, t.hp.n_embd_kv());
            std::vector<float> tf_logits;
            t.pool.run([&] { t.fwd.eval(tf, kv_tf, tf_logits, true); });
            size_t agree = 0;
            for (size_t i = 0; i < tf.size(); ++i) {
                const int32_t a = argmax(std::span(tf_logits).subspan(i * V, V));
                agree += a == top1[i];
                if (tf_margins[i] >= kTie) CHECK(a == top1[i]);
            }
            CHECK(agree >= 0.99 * tf.size());
        }
    }
}
