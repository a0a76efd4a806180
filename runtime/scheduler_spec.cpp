// The scheduler's speculative decoding (runtime/spec/): a generating sequence's pass carries
// its last token and the draft tokens guessed after it; the target's logits of every row then
// decide, one row at a time in its Generation, which drafts it keeps, and the KV of the rest
// is cut off again. The rows of a draft are computed as decode steps compute them alone
// (PassOutput::Verify), so the tokens kept are the ones plain decoding would have drawn.
#include <algorithm>

#include "core/error.h"
#include "runtime/kv/kv_cache.h"
#include "runtime/scheduler_job.h"
#include "runtime/spec/lookup_drafter.h"
#include "runtime/spec/model_drafter.h"
#include "runtime/spec/self_drafter.h"

namespace strata::runtime {

namespace {
constexpr int kPricedContext = 256;  // prompt and output tokens of the sequences a planned price assumes
}  // namespace

void Scheduler::plan_prices() {
    if (opts_.spec.mode == SpecMode::Off) return;
    // A pass of r rows priced as a decoding step of r sequences at a typical context.
    const int64_t most = std::min<int64_t>(PassPrices::kMaxRows, int64_t(opts_.max_batch) * (opts_.spec.max_depth + 1));
    for (int64_t rows = 1; rows <= most; ++rows) {
        const double tps = engine_.placement().predict(kPricedContext, kPricedContext, static_cast<int>(rows)).decode_tps_aggregate;
        if (tps > 0) prices_.plan(rows, double(rows) / tps);
    }
}

void Scheduler::start_speculation(Job& j) {
    const SpecOptions& o = opts_.spec;
    if (o.mode == SpecMode::Off || !j.generation || j.request.on_prompt_logits) return;
    if (o.mode == SpecMode::Self) {
        j.spec = std::make_unique<Speculation>(std::make_unique<SelfDrafter>(*o.draft_model, engine_.hparams().n_layer, o.max_depth),
                                               prices_, o.max_depth);
        return;
    }
    if (o.draft_model && (o.mode == SpecMode::Draft || o.mode == SpecMode::Auto)) {
        j.spec = std::make_unique<Speculation>(std::make_unique<ModelDrafter>(*o.draft_model), prices_, o.max_depth);
        return;
    }
    j.spec = std::make_unique<Speculation>(std::make_unique<LookupDrafter>(), prices_, o.max_depth, o.mode == SpecMode::Auto);
}

int64_t Scheduler::add_drafts(std::vector<SeqTokens>& batch, const std::vector<Job*>& owners, int32_t spare, int64_t budget) {
    const KvCache& kv = engine_.kv();
    const int64_t others = static_cast<int64_t>(batch.size()) - 1;
    int64_t added = 0;
    std::vector<int32_t> context;
    for (size_t i = 0; i < batch.size(); ++i) {
        Job& j = *owners[i];
        j.verify.clear();
        if (!j.spec) continue;
        const int32_t held = kv.seq_len(j.seq) + 1;  // with `next`
        const auto made = static_cast<int32_t>(j.result.tokens.size());
        // Drafts past the context or the tokens asked for could never be kept.
        int32_t limit = std::min<int32_t>(engine_.n_ctx() - held, j.request.params.n_predict - made - 1);
        limit = static_cast<int32_t>(std::min<int64_t>(limit, budget - added));
        if (limit <= 0) continue;
        context.assign(j.request.prompt.begin(), j.request.prompt.end());
        context.insert(context.end(), j.result.tokens.begin(), j.result.tokens.end());
        auto draft = j.spec->draft(context, others, limit);
        // Within the KV blocks this step can spare.
        while (!draft.empty() && kv.blocks_needed(j.seq, held + static_cast<int32_t>(draft.size())) -
                                         kv.blocks_needed(j.seq, held) > spare)
            draft = draft.first(draft.size() - 1);
        if (draft.empty()) continue;
        spare -= kv.blocks_needed(j.seq, held + static_cast<int32_t>(draft.size())) - kv.blocks_needed(j.seq, held);
        j.verify.assign(1, j.next);
        j.verify.insert(j.verify.end(), draft.begin(), draft.end());
        batch[i] = {j.seq, j.verify, PassOutput::Verify};
        added += static_cast<int64_t>(draft.size());
    }
    return added;
}

bool Scheduler::feed(Job& j, std::span<const float> rows) {
    KvCache& kv = engine_.kv();
    const int64_t V = engine_.hparams().n_vocab;
    const auto draft = j.drafted();
    // Row i stands where a plain step after i kept drafts would: `held` positions through it.
    const int32_t held = kv.seq_len(j.seq) - static_cast<int32_t>(draft.size());
    int32_t kept = 0;
    std::optional<int32_t> next;
    for (size_t i = 0;; ++i) {
        const int32_t guess = i < draft.size() ? draft[i] : -1;
        next = j.generation->accept(rows.subspan(i * V, V), held + static_cast<int64_t>(i), engine_.n_ctx(), guess);
        if (!next || *next != guess) break;
        ++kept;
    }
    if (!draft.empty()) {
        // The rejected drafts' KV goes; the sequence's last blocks are its own (nothing attached them since the pass).
        const int32_t kept_len = kv.truncate_seq(j.seq, held + kept);
        STRATA_ASSERT(kept_len == held + kept);
        j.result.n_drafted += static_cast<int>(draft.size());
        j.result.n_accepted += kept;
    }
    if (j.spec) j.spec->verified(kept, next.value_or(-1));
    if (next) j.next = *next;
    return next.has_value();
}

void Scheduler::price_pass(const std::vector<SeqTokens>& batch, const std::vector<Job*>& owners, double seconds, bool ok) {
    int64_t rows = 0;
    for (size_t i = 0; i < batch.size(); ++i) {
        if (owners[i]->chunk > 0) return;  // a prompt chunk's pass prices no decoding
        rows += static_cast<int64_t>(batch[i].tokens.size());
    }
    if (ok && rows > 0) prices_.record(rows, seconds);
}

}  // namespace strata::runtime
