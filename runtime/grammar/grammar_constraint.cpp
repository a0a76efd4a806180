#include "runtime/grammar/grammar_constraint.h"

#include <algorithm>
#include <limits>

#include "core/log.h"

namespace strata::runtime {

GrammarConstraint::GrammarConstraint(std::shared_ptr<const Grammar> grammar, const TokenTrie& vocab, std::vector<std::string> triggers,
                                     std::function<size_t(std::string_view)> triggers_from)
    : grammar_(std::move(grammar)), vocab_(vocab), triggers_(std::move(triggers)), triggers_from_(std::move(triggers_from)) {
    if (triggers_.empty()) matcher_.emplace(grammar_);
}

std::optional<size_t> GrammarConstraint::find_trigger(std::string_view text) const {
    const size_t from = triggers_from_ ? triggers_from_(text) : 0;
    if (from == std::string_view::npos) return std::nullopt;
    std::optional<size_t> first;
    for (const std::string& t : triggers_)
        if (const size_t at = text.find(t, from); at != std::string_view::npos && (!first || at < *first)) first = at;
    return first;
}

namespace {
bool is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

// Whether `m` can take nothing but whitespace from here (or end).
bool only_space_follows(const GrammarMatcher& m) {
    for (int b = 0; b < 256; ++b)
        if (!is_space(static_cast<unsigned char>(b)) && m.allows(std::string(1, static_cast<char>(b)))) return false;
    return true;
}
}  // namespace

bool GrammarConstraint::trailing_space(const std::string& piece) const {
    if (!matcher_->complete() || piece.empty() || !std::all_of(piece.begin(), piece.end(), [](char c) { return is_space(c); }))
        return false;
    GrammarMatcher after = *matcher_;
    return after.accept(piece) && after.complete() && only_space_follows(after);
}

bool GrammarConstraint::allows(int32_t token) const {
    if (matcher_)
        return vocab_.is_eog(token) ? matcher_->complete()
                                    : matcher_->allows(vocab_.piece(token)) && !trailing_space(vocab_.piece(token));
    // Free until a trigger: a token that completes one must also start the grammar right.
    if (vocab_.is_eog(token)) return true;
    const std::string text = text_ + vocab_.piece(token);
    const std::optional<size_t> at = find_trigger(text);
    return !at || GrammarMatcher(grammar_).allows(std::string_view(text).substr(*at));
}

const std::vector<uint8_t>& GrammarConstraint::allowed_now() {
    const GrammarMatcher::State& s = matcher_->state();
    std::vector<uint32_t> key;
    for (const GrammarMatcher::Node* n : s.stacks) key.push_back(n ? n->id : 0);
    std::sort(key.begin(), key.end());
    key.push_back(s.pending);
    key.push_back(s.partial);
    key.push_back(s.length);
    ++clock_;
    for (CachedMask& c : cache_)
        if (c.key == key) {
            c.last_used = clock_;
            return c.allowed;
        }
    CachedMask* slot = nullptr;
    if (cache_.size() < kCachedMasks) {
        slot = &cache_.emplace_back();
    } else {
        slot = &*std::min_element(cache_.begin(), cache_.end(),
                                  [](const CachedMask& a, const CachedMask& b) { return a.last_used < b.last_used; });
    }
    slot->key = std::move(key);
    slot->last_used = clock_;
    vocab_.allowed_tokens(*matcher_, slot->allowed);
    if (matcher_->complete())
        for (size_t t = 0; t < slot->allowed.size(); ++t)
            if (slot->allowed[t] && !vocab_.is_eog(static_cast<int32_t>(t)) && trailing_space(vocab_.piece(static_cast<int32_t>(t))))
                slot->allowed[t] = 0;
    return slot->allowed;
}

bool GrammarConstraint::mask(std::span<float> logits) {
    const std::vector<uint8_t>* allowed = nullptr;
    if (matcher_) {
        allowed = &allowed_now();
    } else {
        // Waiting for a trigger: rare (a drawn token completed a trigger badly); check each token.
        scratch_.resize(logits.size());
        for (size_t t = 0; t < logits.size(); ++t) scratch_[t] = allows(static_cast<int32_t>(t)) ? 1 : 0;
        allowed = &scratch_;
    }
    bool any = false;
    for (size_t t = 0; t < logits.size(); ++t) {
        if ((*allowed)[t])
            any = true;
        else
            logits[t] = -std::numeric_limits<float>::infinity();
    }
    return any;
}

void GrammarConstraint::accept(int32_t token) {
    if (vocab_.is_eog(token)) return;
    const std::string& piece = vocab_.piece(token);
    if (matcher_) {
        if (!matcher_->accept(piece)) STRATA_LOG_WARN("grammar: token {} was not allowed; the output left the grammar", token);
        return;
    }
    text_ += piece;
    if (const std::optional<size_t> at = find_trigger(text_)) {
        matcher_.emplace(grammar_);
        if (!matcher_->accept(std::string_view(text_).substr(*at))) {
            STRATA_LOG_WARN("grammar: the output after its trigger does not start the grammar; it stays unconstrained");
            matcher_.reset();
            triggers_.clear();
        }
        text_.clear();
    }
}

}  // namespace strata::runtime
