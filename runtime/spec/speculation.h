#pragma once
// Speculative decoding's choices for one sequence: which drafter guesses its next tokens, and
// how many of them the next pass verifies. The depth is the one that maximises the tokens a
// second the pass yields: the expected accepted tokens at the acceptance rate this sequence has
// seen (each draft token kept with probability alpha while the ones before it were), over the
// measured price of a pass of that many more rows (PassPrices). Where rows are nearly free
// beside the weights' reading (streamed weights) that is a deep draft; where a row costs as
// much as a pass it is none: the drafter then only guesses in the shadow of each plain step,
// against the token the step draws, to keep its rate current, at no cost. A drafter whose
// guesses cost passes of their own (a draft model) adds its time per token to the price and
// guesses only what will be verified.
#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "runtime/spec/drafter.h"

namespace strata::runtime {

enum class SpecMode : uint8_t {
    Auto,    // lookup, each draft as deep as pays (none where it does not)
    Off,
    Lookup,  // prompt lookup (n-grams of the sequence itself), every guess verified whatever it costs
    Draft,   // a small draft model (--draft-model), each draft as deep as pays
    Self,    // the model's own first layers (runtime/spec/self_drafter.h), each draft as deep as pays
};
// "auto", "off", "lookup", "draft", "self"; throws UsageError naming the choices.
SpecMode parse_spec_mode(std::string_view name);
std::string_view spec_mode_name(SpecMode mode);

class Engine;

struct SpecOptions {
    SpecMode mode = SpecMode::Auto;
    int32_t max_depth = 16;  // draft tokens one pass verifies at most
    // The draft model (--draft-model), loaded and checked (check_same_vocabulary): Draft's
    // drafter, and Auto's where it is given; for Self, the model's first layers (open_early_layers).
    Engine* draft_model = nullptr;
};

// Seconds of a decoding pass (no prompt in it) by its rows: as measured (a moving average),
// else as the plan predicts it.
class PassPrices {
public:
    static constexpr int64_t kMaxRows = 64;
    void record(int64_t rows, double seconds);
    void plan(int64_t rows, double seconds);
    // The price of a pass of `rows` rows: measured, else planned; where neither, the nearest
    // measured count below it (an unpriced count is tried before it is judged); 0 when none.
    double price(int64_t rows) const;

private:
    std::array<double, kMaxRows + 1> seconds_{}, planned_{};
};

class Speculation {
public:
    // `priced`: each draft as deep as pays; else every guess up to max_depth is verified.
    Speculation(std::unique_ptr<Drafter> drafter, const PassPrices& prices, int32_t max_depth, bool priced = true);

    // The draft tokens to verify after `context` (prompt and output, the last token not yet
    // evaluated) in a pass that `others` rows of other sequences share, at most `limit`;
    // empty for a plain step.
    std::span<const int32_t> draft(std::span<const int32_t> context, int64_t others, int32_t limit);
    // The pass kept `accepted` of the draft's tokens, then drew `next` (-1: the sequence ended).
    void verified(int32_t accepted, int32_t next);

    double acceptance() const { return kept_ / (kept_ + missed_); }

private:
    int32_t depth(int64_t others, int32_t proposed) const;
    // The drafter's seconds per guessed token (a costly drafter's; 0 for a free one).
    double draft_price() const { return drafter_->costly() ? draft_seconds_ : 0; }
    void observe(int32_t kept, bool missed);

    std::unique_ptr<Drafter> drafter_;
    const PassPrices& prices_;
    int32_t max_depth_;
    bool priced_;
    std::vector<int32_t> guess_;  // the drafter's last proposal
    size_t verifying_ = 0;        // of which the pass verifies this many (0: a shadow guess)
    double kept_ = 1, missed_ = 1;  // decayed counts of draft tokens kept and of first misses
    double draft_seconds_ = 0;      // a costly drafter's time per guessed token, a moving average
};

}  // namespace strata::runtime
