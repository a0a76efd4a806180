#pragma once
// A cap on the tokens a reasoning model spends reasoning (llama.cpp's --reasoning-budget): the
// tokens a reply writes inside its reasoning are counted from the opening, and once the budget
// is spent (at a whole UTF-8 character) the reasoning is closed for the model: a message, if
// given, then the family's closer, forced a token at a time; the model writes its answer after.
// A reply that ends its reasoning in time, or answers without reasoning, is left alone.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "models/chat_reasoning.h"

namespace strata::runtime {

struct ReasoningBudgetParams {
    int tokens = -1;                              // < 0: no cap; 0: closed as soon as opened
    std::optional<models::ReasoningStyle> style;  // the template's; none: no reasoning to cap
    std::string message;                          // written before the closer ("Time to answer.")
    bool capped() const { return tokens >= 0 && style.has_value(); }
};

class ReasoningBudget {
public:
    // `forced`: the message and closer as token ids.
    ReasoningBudget(int tokens, models::ReasoningStyle style, std::vector<int32_t> forced);

    // The token the reply must take next; nullopt: the model chooses.
    std::optional<int32_t> forced() const;
    // The reply took a token whose text is `piece`.
    void accept(std::string_view piece);

private:
    enum class Phase { Waiting, Counting, Forcing, Done };
    // Forcing once the budget is spent and no character is cut in two.
    void force_if_spent();

    models::ReasoningStyle style_;
    std::vector<int32_t> forced_;
    Phase phase_ = Phase::Waiting;
    std::string text_;  // the reply so far, until the budget is done with it
    size_t open_at_ = 0;  // where the reasoning begins in it
    int left_;            // tokens still allowed
    size_t next_ = 0;     // forced tokens taken
};

}  // namespace strata::runtime
