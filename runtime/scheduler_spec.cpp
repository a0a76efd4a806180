// The scheduler's speculative decoding (runtime/spec/): a generating sequence's pass carries
// its last token and the draft tokens guessed after it, a chain or a tree; the target's logits
// of every row then decide, one row at a time in its Generation, which path of drafts it keeps
// (at each node its children tried in turn), and the KV of the rest is cut off again (a
// tree's kept path moved to its positions). The rows of a draft are computed as decode steps compute them alone
// (PassOutput::Verify), so the tokens kept are the ones plain decoding would have drawn.
#include <algorithm>

#include "core/error.h"
#include "core/kernel_shapes.h"
#include "runtime/exec/draft_rows.h"
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
    // A pass of r rows priced as one sequence's decoding step of r rows (its draft verified) at
    // a typical context: the weights and the sequence's KV cache read once, every row computed.
    const int64_t most = std::min<int64_t>(PassPrices::kMaxRows, int64_t(opts_.max_batch) * (opts_.spec.max_depth + 1));
    for (int64_t rows = 1; rows <= most; ++rows)
        prices_.plan(rows, engine_.predict(kPricedContext, kPricedContext, 1, static_cast<int>(rows)).decode.time_s);
}

void Scheduler::start_speculation(Job& j) {
    const SpecOptions& o = opts_.spec;
    if (o.mode == SpecMode::Off || !j.generation || j.request.on_prompt_logits) return;
    // Trees where the pass verifies them, else chains.
    const int32_t width = engine_.verifies_trees() ? o.max_width : 1;
    if (o.mode == SpecMode::Self) {
        j.spec = std::make_unique<Speculation>(std::make_unique<SelfDrafter>(*o.draft_model, engine_.hparams().n_layer, o.max_depth),
                                               prices_, o.max_depth);
        return;
    }
    if (o.draft_model && (o.mode == SpecMode::Draft || o.mode == SpecMode::Auto)) {
        j.spec = std::make_unique<Speculation>(std::make_unique<ModelDrafter>(*o.draft_model), prices_, o.max_depth, true, width);
        return;
    }
    j.spec = std::make_unique<Speculation>(std::make_unique<LookupDrafter>(), prices_, o.max_depth, o.mode == SpecMode::Auto, width);
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
        // And within the rows of logits the DRAM budget holds (this pass's decoders and drafts so far).
        limit = static_cast<int32_t>(std::min<int64_t>(limit, engine_.max_logit_rows() - others - 1 - added));
        if (limit <= 0) continue;
        context.assign(j.request.prompt.begin(), j.request.prompt.end());
        context.insert(context.end(), j.result.tokens.begin(), j.result.tokens.end());
        const DraftTree& draft = j.spec->draft(context, others, limit);
        if (draft.empty()) continue;
        j.verify.assign(1, j.next);
        j.parents.assign(1, -1);
        for (size_t d = 0; d < draft.size(); ++d) j.verify.push_back(draft.tokens[d]), j.parents.push_back(draft.parent[d] + 1);
        // Within the context and the KV blocks this step can spare (the last nodes go first:
        // no node comes before its parent).
        auto extra = [&] {
            const auto end = static_cast<int32_t>(kv.seq_len(j.seq) + draft_span(j.parents));
            return end > engine_.n_ctx() ? spare + 1 : kv.blocks_needed(j.seq, end) - kv.blocks_needed(j.seq, held);
        };
        while (j.verify.size() > 1 && extra() > spare) j.verify.pop_back(), j.parents.pop_back();
        // A tree whose slots cross a part of kAttentionSplitKeys keys is attended whole, with
        // other rounding than its chains' decode steps (cpu::attention): its last nodes wait.
        const int64_t base = kv.seq_len(j.seq);
        auto crosses = [&] {
            return !draft_is_chain(j.parents) &&
                   base / kAttentionSplitKeys != (base + draft_span(j.parents) - 1) / kAttentionSplitKeys;
        };
        while (j.verify.size() > 1 && crosses()) j.verify.pop_back(), j.parents.pop_back();
        if (j.verify.size() == 1) {
            j.verify.clear();
            continue;
        }
        spare -= extra();
        batch[i] = {j.seq, j.verify, PassOutput::Verify, j.parents, true, cpu::AttentionRows::Decode};
        added += static_cast<int64_t>(j.verify.size()) - 1;
    }
    return added;
}

bool Scheduler::feed(Job& j, std::span<const float> rows, int64_t first_row) {
    KvCache& kv = engine_.kv();
    const int64_t V = engine_.hparams().n_vocab;
    // A row the pass left out, with the likeliest path below it (each node's first child, as
    // many rows as a decode step computes together), computed when the path reaches it.
    std::vector<int64_t> wanted;
    auto head_from = [&](int32_t node) {
        if (first_row < 0 || !engine_.deferred(first_row + node)) return;
        wanted.clear();
        for (const int32_t n : first_child_path(j.parents, int32_t(j.verify.size()), node, Backend::kDecodeRows))
            wanted.push_back(first_row + n);
        engine_.head_deferred(wanted);
    };
    const auto draft = j.drafted();
    // A tree is not committed by its pass (Backend::eval_batch); a chain is, and loses its tail.
    const bool tree = !draft.empty() && !draft_is_chain(j.parents);
    // Row r stands where a plain step after its ancestors would: `held` positions through the
    // first row, one more a level down.
    const int32_t held = tree ? kv.seq_len(j.seq) + 1 : kv.seq_len(j.seq) - static_cast<int32_t>(draft.size());
    std::vector<int32_t> path{0}, children;  // rows kept, from next on
    std::optional<int32_t> next;
    for (;;) {
        const int32_t node = path.back();
        children.clear();
        for (size_t r = size_t(node) + 1; r < j.verify.size(); ++r)
            if (j.parents[r] == node) children.push_back(j.verify[r]);
        head_from(node);
        next = j.generation->accept(rows.subspan(size_t(node) * V, V), held + static_cast<int64_t>(path.size()) - 1,
                                    engine_.n_ctx(), children);
        if (!next) break;
        const auto kept = std::find(children.begin(), children.end(), *next);
        if (kept == children.end()) break;
        // The kept child's row: the (kept - begin)-th child of `node`.
        int32_t rank = static_cast<int32_t>(kept - children.begin());
        for (size_t r = size_t(node) + 1;; ++r)
            if (j.parents[r] == node && rank-- == 0) {
                path.push_back(static_cast<int32_t>(r));
                break;
            }
    }
    const auto kept = static_cast<int32_t>(path.size()) - 1;
    if (!draft.empty()) {
        if (tree) {
            // The kept path's keys and values move to its positions; the rest of the tree goes.
            const auto slots = draft_slots(j.parents);
            std::vector<int64_t> from;
            std::vector<int32_t> tokens;
            for (const int32_t r : path) from.push_back(slots[size_t(r)]), tokens.push_back(j.verify[size_t(r)]);
            engine_.keep_path(j.seq, from, tokens);
        } else {
            // The rejected drafts' KV goes; the sequence's last blocks are its own (nothing attached them since the pass).
            const int32_t kept_len = kv.truncate_seq(j.seq, held + kept);
            STRATA_ASSERT(kept_len == held + kept);
        }
        j.result.n_drafted += static_cast<int>(draft.size());
        j.result.n_accepted += kept;
    }
    if (j.spec) {
        std::vector<int32_t> nodes;  // the kept path as the draft's node indices
        for (size_t k = 1; k < path.size(); ++k) nodes.push_back(path[k] - 1);
        j.spec->verified(nodes, next.value_or(-1));
    }
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
