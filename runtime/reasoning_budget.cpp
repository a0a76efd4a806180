#include "runtime/reasoning_budget.h"

#include <algorithm>

#include "runtime/text_stream.h"

namespace strata::runtime {

ReasoningBudget::ReasoningBudget(int tokens, models::ReasoningStyle style, std::vector<int32_t> forced)
    : style_(style), forced_(std::move(forced)), left_(tokens) {
    // A reasoning the prompt opened is counted (and a budget of 0 closed) from the first token.
    if (models::reasoning_opening("", style).state == models::ReasoningOpening::State::Open) {
        phase_ = Phase::Counting;
        force_if_spent();
    }
}

std::optional<int32_t> ReasoningBudget::forced() const {
    if (phase_ != Phase::Forcing) return std::nullopt;
    return forced_[next_];
}

void ReasoningBudget::force_if_spent() {
    if (left_ > 0 || utf8_complete_prefix(text_) != text_.size()) return;
    phase_ = forced_.empty() ? Phase::Done : Phase::Forcing;
}

void ReasoningBudget::accept(std::string_view piece) {
    if (phase_ == Phase::Done) return;  // (the reply's text is no longer needed)
    const size_t before = text_.size();
    text_ += piece;
    switch (phase_) {
        case Phase::Waiting: {
            const models::ReasoningOpening o = models::reasoning_opening(text_, style_);
            if (o.state == models::ReasoningOpening::State::Absent) phase_ = Phase::Done;
            if (o.state != models::ReasoningOpening::State::Open) return;
            // The token that opens the reasoning is not part of it, unless it writes reasoning too.
            phase_ = Phase::Counting;
            open_at_ = o.at;
            if (text_.size() > open_at_) --left_;
            break;
        }
        case Phase::Counting: --left_; break;
        case Phase::Forcing:
            if (++next_ == forced_.size()) phase_ = Phase::Done;
            return;
        case Phase::Done: return;  // (not reached)
    }
    // Ended by the model: only this token's text (and a marker it completes) is new.
    const std::string_view end = models::reasoning_end(style_);
    const size_t from = std::max(open_at_, before >= end.size() ? before - end.size() + 1 : 0);
    if (text_.find(end, from) != std::string::npos) {
        phase_ = Phase::Done;
        return;
    }
    force_if_spent();
}

}  // namespace strata::runtime
