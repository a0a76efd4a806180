#include "runtime/exec/backend.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"
#include "runtime/exec/draft_rows.h"

namespace strata::runtime {

void Backend::check(std::span<const int32_t> tokens) const {
    if (tokens.empty()) throw UsageError("nothing to evaluate: the token list is empty");
    for (int32_t t : tokens)
        if (t < 0 || t >= hp_.n_vocab)
            throw UsageError(fmt::format("token id {} is outside the vocabulary (0..{})", t, hp_.n_vocab - 1),
                             "send ids this model's tokenizer makes (/tokenize), or the text itself");
}

void Backend::pass(std::span<const int32_t> tokens, std::span<const PassLayout::Segment> segments,
                   std::span<const std::span<const int32_t>> trees, int64_t n_long, KvCache& kv) {
    PassLayout& p = layout_;
    const int64_t n = static_cast<int64_t>(tokens.size());
    p.tokens = tokens;
    p.segments.assign(segments.begin(), segments.end());
    p.drafts.clear();
    p.pos.resize(n);
    p.block.resize(n);
    p.row.resize(n);
    p.dirty.clear();
    for (size_t si = 0; si < segments.size(); ++si) {
        PassLayout::Segment& s = p.segments[si];
        const DraftRows* d = nullptr;
        if (!trees[si].empty()) {
            if (!verifies_trees(kv))
                throw UsageError("a draft tree needs every layer's keys and values kept as they are (none rebuilt from saved "
                                 "hidden states)",
                                 "draft chains on this run");
            s.draft = static_cast<int32_t>(p.drafts.size());
            d = &p.drafts.emplace_back(lay_out_draft(trees[si], s.pos0));
        }
        const int64_t span = p.span(s);
        const auto table = kv.block_table(s.seq);
        if (KvCache::blocks_for(s.pos0 + span) > static_cast<int64_t>(table.size()))
            throw UsageError(fmt::format("sequence {} has no KV blocks reserved for positions {}..{}", s.seq, s.pos0,
                                         s.pos0 + span - 1),
                             "reserve them first (KvCache::reserve)");
        for (int64_t i = 0; i < s.n; ++i) {
            const int64_t t = s.first + i, slot = d ? d->slot[size_t(i)] : s.pos0 + i;
            p.pos[t] = d ? d->pos[size_t(i)] : slot;
            p.block[t] = table[slot / KvCache::kBlockSize];
            p.row[t] = static_cast<int32_t>(slot % KvCache::kBlockSize);
            if (p.dirty.empty() || p.dirty.back() != p.block[t]) p.dirty.push_back(p.block[t]);
        }
    }
    p.n_long = n_long;
    std::sort(p.dirty.begin(), p.dirty.end());
    p.dirty.erase(std::unique(p.dirty.begin(), p.dirty.end()), p.dirty.end());
    compute(p, kv);
    for (const auto& s : p.segments)
        if (s.draft < 0) kv.commit(s.seq, tokens.subspan(s.first, s.n));
}

bool Backend::deferred(int64_t logit_row) const {
    return std::any_of(deferred_.begin(), deferred_.end(), [&](const auto& d) { return d.first == logit_row; });
}

void Backend::head_deferred(std::span<const int64_t> logit_rows, std::vector<float>& logits) {
    std::vector<int64_t> rows, dest;
    for (const int64_t want : logit_rows) {
        const auto it = std::find_if(deferred_.begin(), deferred_.end(), [&](const auto& d) { return d.first == want; });
        if (it == deferred_.end()) continue;
        dest.push_back(it->first), rows.push_back(it->second);
        deferred_.erase(it);
    }
    if (rows.empty()) return;
    const int64_t V = hp_.n_vocab;
    std::vector<float> out(rows.size() * V);
    head(rows, out.data(), 0);
    for (size_t i = 0; i < rows.size(); ++i) std::copy_n(&out[i * V], V, &logits[dest[i] * V]);
}

void Backend::eval_batch(std::span<const SeqTokens> batch, KvCache& kv, std::vector<float>& logits, std::vector<float>& states) {
    int64_t total = 0;
    std::vector<SeqId> seqs;
    std::vector<int64_t> row0;  // each entry's first row of logits
    int64_t n_rows = 0;
    for (const SeqTokens& e : batch) {
        check(e.tokens);
        if (!e.parent.empty() && (e.output != PassOutput::Verify || e.parent.size() != e.tokens.size()))
            throw UsageError(fmt::format("a draft tree of {} tokens names {} parents", e.tokens.size(), e.parent.size()),
                             "give a Verify entry one parent per token");
        total += static_cast<int64_t>(e.tokens.size());
        seqs.push_back(e.seq);
        row0.push_back(n_rows);
        n_rows += logit_rows(e);
    }
    std::sort(seqs.begin(), seqs.end());
    if (std::adjacent_find(seqs.begin(), seqs.end()) != seqs.end())
        throw UsageError("a batch names the same sequence twice", "give each sequence's tokens as one entry");
    const int64_t V = hp_.n_vocab, E = hp_.n_embd;
    deferred_.clear();
    logits.assign(n_rows * V, 0.0f);
    states.assign(batch.size() * E, 0.0f);
    reserve(std::min(kMaxUbatch, total));
    // Passes of up to kMaxUbatch tokens; an entry may be split across passes. Entries of more
    // than kDecodeRows tokens first (PassLayout::n_long).
    std::vector<size_t> order(batch.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    auto long_entry = [&](const SeqTokens& e) { return int64_t(e.tokens.size()) > kDecodeRows && e.output != PassOutput::Verify; };
    std::stable_partition(order.begin(), order.end(), [&](size_t i) { return long_entry(batch[i]); });
    std::vector<int32_t> tokens;
    std::vector<PassLayout::Segment> segments;
    std::vector<std::span<const int32_t>> trees;  // per segment: its draft tree, unless a chain
    std::vector<int64_t> rows, dest;      // pass rows that go through the head, and their row of logits
    std::vector<int64_t> hrows, howners;  // rows whose hidden state an entry takes
    std::vector<float> out;
    size_t entry = 0, done = 0;  // the next token: batch[order[entry]].tokens[done]
    while (entry < batch.size()) {
        tokens.clear();
        segments.clear();
        trees.clear();
        rows.clear();
        dest.clear();
        hrows.clear();
        howners.clear();
        int64_t n_scored = 0;  // rows of AllLogits entries, which come first in `rows`
        int64_t n_long = 0;  // rows of the leading segments of more than kDecodeRows tokens
        bool leading = true;
        while (entry < batch.size() && static_cast<int64_t>(tokens.size()) < kMaxUbatch) {
            const SeqTokens& e = batch[order[entry]];
            const size_t take = std::min(e.tokens.size() - done, size_t(kMaxUbatch) - tokens.size());
            if (e.output == PassOutput::Verify && take < e.tokens.size()) {
                if (e.tokens.size() > size_t(kMaxUbatch))
                    throw UsageError(fmt::format("{} draft tokens to verify are more than a pass holds ({})", e.tokens.size(), kMaxUbatch));
                break;  // verified in one pass: the next
            }
            leading = leading && int64_t(take) > kDecodeRows && e.output != PassOutput::Verify;
            if (leading) n_long += static_cast<int64_t>(take);
            const auto first = static_cast<int64_t>(tokens.size());
            const auto owner = static_cast<int64_t>(order[entry]);
            // Earlier passes committed this entry's first `done` tokens already.
            segments.push_back({e.seq, kv.seq_len(e.seq), first, static_cast<int64_t>(take), -1, e.rows});
            trees.push_back(draft_is_chain(e.parent) ? std::span<const int32_t>{} : e.parent);
            tokens.insert(tokens.end(), e.tokens.begin() + done, e.tokens.begin() + done + take);
            const bool ends = done + take == e.tokens.size();
            const int64_t last = static_cast<int64_t>(tokens.size()) - 1;
            if (e.output == PassOutput::AllLogits) {
                for (int64_t r = first; r <= last; ++r) {
                    rows.insert(rows.begin() + n_scored, r);
                    dest.insert(dest.begin() + n_scored, row0[owner] + int64_t(done) + (r - first));
                    ++n_scored;
                }
            } else if (e.output == PassOutput::Verify) {
                std::vector<bool> likely(e.tokens.size(), true);
                if (e.defer_head && defers_verify_head()) {
                    likely.assign(e.tokens.size(), false);
                    for (const int32_t node : first_child_path(e.parent, int32_t(e.tokens.size()), 0, kDecodeRows))
                        likely[size_t(node)] = true;
                }
                for (int64_t r = first; r <= last; ++r) {
                    const int64_t at = row0[owner] + (r - first);
                    if (!likely[size_t(r - first)]) {
                        deferred_.emplace_back(at, r);
                        continue;
                    }
                    rows.push_back(r);
                    dest.push_back(at);
                }
            } else if (e.output == PassOutput::Logits && ends) {
                rows.push_back(last);
                dest.push_back(row0[owner]);
            } else if ((e.output == PassOutput::LastHidden && ends) || (e.output == PassOutput::FirstHidden && done == 0)) {
                hrows.push_back(e.output == PassOutput::LastHidden ? last : first);
                howners.push_back(owner);
            } else if (e.output == PassOutput::SumHidden) {
                for (int64_t r = first; r <= last; ++r) {
                    hrows.push_back(r);
                    howners.push_back(owner);
                }
            }
            done += take;
            if (ends) {
                ++entry;
                done = 0;
            }
        }
        // Rows are deferred only from the last pass: an earlier one's hidden states are gone.
        if (entry < batch.size())
            for (const auto& [at, r] : std::exchange(deferred_, {})) rows.push_back(r), dest.push_back(at);
        pass(tokens, segments, trees, n_long, kv);
        if (!rows.empty()) {
            out.resize(rows.size() * V);
            head(rows, out.data(), n_scored);
            for (size_t i = 0; i < rows.size(); ++i) std::copy_n(&out[i * V], V, &logits[dest[i] * V]);
        }
        if (!hrows.empty()) {
            out.resize(hrows.size() * E);
            hidden(hrows, out.data());
            for (size_t i = 0; i < hrows.size(); ++i)
                for (int64_t c = 0; c < E; ++c) states[howners[i] * E + c] += out[i * E + c];
        }
    }
}

}  // namespace strata::runtime
