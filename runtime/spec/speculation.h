#pragma once
// Speculative decoding's choices for one sequence: which drafter guesses its next tokens, and
// which of them the next pass verifies, a chain or a tree. Each guessed node has a chance to be
// kept: its parent's times the chance that the target draws it there, from the acceptance this
// sequence has seen by rank among siblings (the drafter's first guess, its second, ...) and by
// depth: a drafter that copies the text is often wrong at the first token and seldom once a
// copy runs, so a node's chance given its parent's grows with its depth, and a chain's tail is
// worth more than the first token's rate to the power of its depth says. The
// pass verifies the most likely nodes, as many as give the most tokens a second: the expected
// kept tokens over the measured price of a pass of that many more rows (PassPrices). Where rows are nearly free
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

inline constexpr int32_t kMaxDraftWidth = 4;  // children a draft node may have at most (--spec-width)
inline constexpr int32_t kDepthClasses = 6;   // depths with acceptance counts of their own (the last: it and deeper)

struct SpecOptions {
    SpecMode mode = SpecMode::Auto;
    int32_t max_depth = 16;  // draft tokens one pass verifies at most
    int32_t max_width = kMaxDraftWidth;  // children a draft node may have (1: chains only)
    // The draft model (--draft-model), loaded and checked (check_same_vocabulary): Draft's
    // drafter, and Auto's where it is given; for Self, the model's first layers (open_early_layers).
    Engine* draft_model = nullptr;
};

// Seconds of a decoding pass (no prompt in it) by its rows: as measured (a moving average per
// row count), else as the plan predicts it.
class PassPrices {
public:
    static constexpr int64_t kMaxRows = 64;
    void record(int64_t rows, double seconds);
    void plan(int64_t rows, double seconds);
    // The price of a pass of `rows` rows. Where two row counts or more are measured: the line
    // through them (least squares, each count weighted by how often it was measured), since a
    // pass costs its weights' reading plus each row's arithmetic, and a count measured once on a
    // busy machine must not price itself out of ever being tried again. Where one count is: the
    // plan's prices scaled to it (the plan's level is not this machine's), else that price (an
    // unpriced count is tried before it is judged). Where none: the plan's; 0 when none either.
    double price(int64_t rows) const;

private:
    void fit();

    std::array<double, kMaxRows + 1> seconds_{}, planned_{}, weight_{};
    int n_measured_ = 0;   // row counts measured
    int64_t only_ = 0;     // the one measured count, while there is one
    double base_ = 0, per_row_ = 0;  // the line through the measured prices
};

class Speculation {
public:
    // `priced`: each draft as large as pays; else every guess up to max_depth is verified.
    // `width`: children a node of a draft may have (1: chains, where the pass verifies no trees).
    Speculation(std::unique_ptr<Drafter> drafter, const PassPrices& prices, int32_t max_depth, bool priced = true,
                int32_t width = kMaxDraftWidth);

    // The draft to verify after `context` (prompt and output, the last token not yet evaluated)
    // in a pass that `others` rows of other sequences share, at most `limit` tokens: the
    // drafter's most likely nodes, as many as pay; empty for a plain step.
    const DraftTree& draft(std::span<const int32_t> context, int64_t others, int32_t limit);
    // The pass kept the draft's nodes `path` (each a child of the one before, the first of the
    // sequence's last token), then drew `next` (-1: the sequence ended).
    void verified(std::span<const int32_t> path, int32_t next);

    // The chance that the target draws a node's child of rank `rank` (its drafter's rank-th
    // guess there) at `depth` (0: after the sequence's last token) when it drew none of the ones
    // before. A depth with few trials leans on the depth above it.
    double acceptance(int32_t rank = 0, int32_t depth = 0) const;

private:
    // Each node's chance that the target's tokens run down to it.
    std::vector<double> chances(const DraftTree& tree) const;
    // Of guess_, the nodes worth verifying (at most `limit`), into chosen_.
    void choose(int64_t others, int32_t limit);
    // The drafter's seconds per guessed token (a costly drafter's; 0 for a free one).
    double draft_price() const { return drafter_->costly() ? draft_seconds_ : 0; }
    // The target drew `drawn` after `node` of `tree` (-1: the sequence's last token), whose
    // children stand at `depth`: a trial of each of them up to the one drawn.
    void observe(const DraftTree& tree, int32_t node, int32_t depth, int32_t drawn);
    // A chain's nodes' chances, `n` deep.
    std::vector<double> chain_chances(int32_t n) const;

    std::unique_ptr<Drafter> drafter_;
    const PassPrices& prices_;
    int32_t max_depth_;
    bool priced_;
    int32_t width_;
    DraftTree guess_;   // the drafter's last proposal
    DraftTree chosen_;  // of which the pass verifies these (empty: a shadow guess)
    // Per depth class and rank, decayed counts of children drawn and passed over.
    using Counts = std::array<std::array<double, kMaxDraftWidth>, kDepthClasses>;
    Counts kept_{}, missed_{};
    double draft_seconds_ = 0;  // a costly drafter's time per guessed token, a moving average
};

}  // namespace strata::runtime
