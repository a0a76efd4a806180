#include "runtime/spec/model_drafter.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "models/tokenizer.h"
#include "runtime/kv/kv_cache.h"

namespace strata::runtime {

void check_same_vocabulary(const models::Tokenizer& target, const models::Tokenizer& draft) {
    const std::string hint = "give --draft-model a smaller model of the same family (the same tokenizer), or use --spec lookup";
    if (target.n_vocab() != draft.n_vocab())
        throw UsageError(fmt::format("the draft model has {} tokens in its vocabulary, the model {}", draft.n_vocab(), target.n_vocab()),
                         hint);
    for (int32_t t = 0; t < target.n_vocab(); ++t)
        if (target.piece(t) != draft.piece(t))
            throw UsageError(fmt::format("token {} is '{}' to the draft model but '{}' to the model", t, draft.piece(t), target.piece(t)),
                             hint);
}

ModelDrafter::ModelDrafter(Engine& draft) : engine_(draft) {}

ModelDrafter::~ModelDrafter() { restart(); }

void ModelDrafter::restart() {
    if (seq_ >= 0) engine_.free_seq(seq_);
    seq_ = -1;
}

namespace {
// A runner-up within this many nats of the first choice (at least 0.3 of its probability) branches.
constexpr float kUnsureLogits = 1.2f;
}  // namespace

void ModelDrafter::draft(std::span<const int32_t> context, int32_t max, std::vector<int32_t>& out) {
    guess(context, max, out, nullptr);
}

void ModelDrafter::draft_tree(std::span<const int32_t> context, int32_t depth, int32_t nodes, int32_t width, DraftTree& out) {
    std::vector<int32_t> chain, unsure;
    guess(context, std::min(depth, nodes), chain, width > 1 ? &unsure : nullptr);
    out.assign_chain(chain);
    for (size_t i = 0; i < unsure.size() && static_cast<int32_t>(out.size()) < nodes; ++i)
        if (unsure[i] >= 0) out.add(unsure[i], static_cast<int32_t>(i) - 1);  // a sibling of chain token i
}

void ModelDrafter::guess(std::span<const int32_t> context, int32_t max, std::vector<int32_t>& out, std::vector<int32_t>* unsure) {
    out.clear();
    if (unsure) unsure->clear();
    KvCache& kv = engine_.kv();
    // Room for the context and the drafts in the draft model's own context.
    max = std::min<int32_t>(max, engine_.n_ctx() - static_cast<int32_t>(context.size()));
    if (max <= 0 || context.empty()) return;
    if (seq_ < 0) seq_ = engine_.create_seq();
    // Keep what it holds of the context, but at least the last token to evaluate for its logits.
    const auto held = kv.seq_tokens(seq_);
    const auto same = std::mismatch(held.begin(), held.end(), context.begin(), context.end() - 1);
    const auto keep = static_cast<int32_t>(same.first - held.begin());
    const int32_t kept = kv.truncate_seq(seq_, keep);
    std::vector<int32_t> feed(context.begin() + kept, context.end());
    try {
        for (int32_t i = 0; i < max; ++i) {
            const SeqTokens e{seq_, feed};
            const auto row = engine_.eval_batch({&e, 1}).first(size_t(engine_.hparams().n_vocab));
            // Its first and second choices.
            int32_t best = 0, second = -1;
            for (int32_t t = 1; t < static_cast<int32_t>(row.size()); ++t) {
                if (row[size_t(t)] > row[size_t(best)]) second = best, best = t;
                else if (second < 0 || row[size_t(t)] > row[size_t(second)]) second = t;
            }
            out.push_back(best);
            if (unsure) unsure->push_back(second >= 0 && row[size_t(best)] - row[size_t(second)] <= kUnsureLogits ? second : -1);
            feed.assign(1, out.back());
        }
    } catch (const OutOfBudget&) {
        // Its KV cache is full with other sequences' drafts: this one starts over next time.
        restart();
    }
}

}  // namespace strata::runtime
