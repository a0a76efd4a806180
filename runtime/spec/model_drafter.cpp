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

int32_t ModelDrafter::argmax(std::span<const float> row) {
    return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

void ModelDrafter::draft(std::span<const int32_t> context, int32_t max, std::vector<int32_t>& out) {
    out.clear();
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
            const auto logits = engine_.eval_batch({&e, 1});
            out.push_back(argmax(logits.first(size_t(engine_.hparams().n_vocab))));
            feed.assign(1, out.back());
        }
    } catch (const OutOfBudget&) {
        // Its KV cache is full with other sequences' drafts: this one starts over next time.
        restart();
    }
}

}  // namespace strata::runtime
