#include "runtime/spec/speculation.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "core/error.h"
#include "planner/speculation.h"

namespace strata::runtime {

namespace {
// Weight of the past in the acceptance counts, per verified draft: recent text decides.
constexpr double kDecay = 0.9;
// Passes a row count's price stands for at most in the line through the prices (its moving
// average remembers about as many).
constexpr double kMaxWeight = 5;
constexpr double kMinSeconds = 1e-9;  // a price stays above 0 where the line would not
// Trials a deeper depth's rate counts its shallower neighbour's for: until it has seen some of
// its own, a depth is judged as the one above it.
constexpr double kPriorTrials = 2;
size_t depth_class(int32_t depth) { return size_t(std::min(depth, kDepthClasses - 1)); }
}  // namespace

SpecMode parse_spec_mode(std::string_view name) {
    for (SpecMode m : {SpecMode::Auto, SpecMode::Off, SpecMode::Lookup, SpecMode::Draft, SpecMode::Self})
        if (spec_mode_name(m) == name) return m;
    throw UsageError(fmt::format("--spec {}: unknown drafter", name), "give auto, off, lookup, draft (with --draft-model) or self");
}

std::string_view spec_mode_name(SpecMode mode) {
    switch (mode) {
        case SpecMode::Auto: return "auto";
        case SpecMode::Off: return "off";
        case SpecMode::Lookup: return "lookup";
        case SpecMode::Draft: return "draft";
        case SpecMode::Self: return "self";
    }
    return "?";
}

void PassPrices::record(int64_t rows, double seconds) {
    if (rows < 1 || rows > kMaxRows) return;
    double& s = seconds_[size_t(rows)];
    if (s <= 0) ++n_measured_, only_ = rows;
    s = s > 0 ? 0.8 * s + 0.2 * seconds : seconds;
    weight_[size_t(rows)] = std::min(weight_[size_t(rows)] + 1, kMaxWeight);
    fit();
}

void PassPrices::fit() {
    if (n_measured_ < 2) return;
    double w = 0, x = 0, y = 0, xx = 0, xy = 0;
    for (int64_t r = 1; r <= kMaxRows; ++r) {
        const double wr = weight_[size_t(r)], s = seconds_[size_t(r)];
        if (s <= 0) continue;
        w += wr, x += wr * double(r), y += wr * s, xx += wr * double(r) * double(r), xy += wr * double(r) * s;
    }
    per_row_ = std::max(0.0, (w * xy - x * y) / (w * xx - x * x));
    base_ = (y - per_row_ * x) / w;
}

void PassPrices::plan(int64_t rows, double seconds) {
    if (rows >= 1 && rows <= kMaxRows) planned_[size_t(rows)] = seconds;
}

double PassPrices::price(int64_t rows) const {
    rows = std::clamp<int64_t>(rows, 1, kMaxRows);
    const double planned = planned_[size_t(rows)];
    if (n_measured_ >= 2) return std::max(base_ + per_row_ * double(rows), kMinSeconds);
    if (n_measured_ == 1) {
        const double measured = seconds_[size_t(only_)], at = planned_[size_t(only_)];
        return planned > 0 && at > 0 ? planned * measured / at : measured;
    }
    return planned;
}

Speculation::Speculation(std::unique_ptr<Drafter> drafter, const PassPrices& prices, int32_t max_depth, bool priced, int32_t width)
    : drafter_(std::move(drafter)), prices_(prices), max_depth_(max_depth), priced_(priced), width_(std::clamp(width, 1, kMaxDraftWidth)) {
    kept_[0].fill(1);  // a first guess's prior: even odds
    missed_[0].fill(1);
}

double Speculation::acceptance(int32_t rank, int32_t depth) const {
    const size_t d = depth_class(depth), r = size_t(rank);
    if (d == 0) return kept_[0][r] / (kept_[0][r] + missed_[0][r]);
    const double above = acceptance(rank, int32_t(d) - 1);
    return (kept_[d][r] + kPriorTrials * above) / (kept_[d][r] + missed_[d][r] + kPriorTrials);
}

std::vector<double> Speculation::chain_chances(int32_t n) const {
    std::vector<double> chance(size_t(std::max(n, 0)));
    double p = 1;
    for (size_t d = 0; d < chance.size(); ++d) chance[d] = (p *= acceptance(0, int32_t(d)));
    return chance;
}

std::vector<double> Speculation::chances(const DraftTree& tree) const {
    std::vector<double> chance(tree.size());
    std::vector<double> passed(tree.size() + 1, 1);  // per parent: the chance its children so far were not drawn
    std::vector<int32_t> children(tree.size() + 1), depth(tree.size());
    for (size_t i = 0; i < tree.size(); ++i) {
        const size_t p = tree.parent[i] < 0 ? tree.size() : size_t(tree.parent[i]);
        const int32_t r = std::min(children[p]++, kMaxDraftWidth - 1);
        depth[i] = tree.parent[i] < 0 ? 0 : depth[p] + 1;
        const double from = tree.parent[i] < 0 ? 1.0 : chance[p];
        const double a = acceptance(r, depth[i]);
        chance[i] = from * passed[p] * a;
        passed[p] *= 1 - a;
    }
    return chance;
}

void Speculation::choose(int64_t others, int32_t limit) {
    chosen_.clear();
    const auto chance = chances(guess_);
    std::vector<size_t> likely(guess_.size());
    for (size_t i = 0; i < likely.size(); ++i) likely[i] = i;
    // Most likely first; a parent is never less likely than its child, and comes first on a tie.
    std::stable_sort(likely.begin(), likely.end(), [&](size_t a, size_t b) { return chance[a] > chance[b]; });
    // Each node after its earlier siblings: the pass tries a node's children in rank order, and
    // the acceptance by rank counts them so.
    std::vector<size_t> order;
    std::vector<uint8_t> taken(guess_.size(), 0);
    for (const size_t i : likely) {
        for (size_t s = 0; s <= i; ++s)
            if (!taken[s] && guess_.parent[s] == guess_.parent[i]) taken[s] = 1, order.push_back(s);
    }
    order.resize(std::min(order.size(), size_t(limit)));
    size_t n = order.size();
    if (priced_) {
        std::vector<double> in_order(order.size());
        for (size_t i = 0; i < order.size(); ++i) in_order[i] = chance[order[i]];
        // The guesses are made: what drafting them cost is spent, only the pass's rows count.
        n = size_t(planner::forecast_draft([&](int64_t rows) { return prices_.price(rows); }, in_order, others).depth);
    }
    order.resize(n);
    std::sort(order.begin(), order.end());
    std::vector<int32_t> at(guess_.size(), -1);  // a guessed node's index among the chosen
    for (size_t i = 0; i < order.size(); ++i) {
        const int32_t p = guess_.parent[order[i]];
        at[order[i]] = static_cast<int32_t>(i);
        chosen_.add(guess_.tokens[order[i]], p < 0 ? -1 : at[size_t(p)]);
    }
}

const DraftTree& Speculation::draft(std::span<const int32_t> context, int64_t others, int32_t limit) {
    limit = static_cast<int32_t>(std::min<int64_t>({int64_t(limit), int64_t(max_depth_), PassPrices::kMaxRows - others - 1}));
    guess_.clear();
    chosen_.clear();
    if (limit <= 0) return chosen_;
    // Candidates beyond the pass's share: the most likely of them are verified. Four times the
    // share lets a copying drafter's less trusted branches in where they are likelier than the
    // deep end of its most trusted one.
    const int32_t candidates = std::min<int32_t>(4 * limit, int32_t(PassPrices::kMaxRows));
    if (!drafter_->costly()) {
        drafter_->draft_tree(context, limit, candidates, width_, guess_);
        choose(others, limit);
        return chosen_;
    }
    // A costly drafter guesses only the tokens to verify: as deep a chain as would pay if it
    // guessed it (its branches cost no passes of their own).
    const int32_t want = priced_ ? planner::forecast_draft([&](int64_t rows) { return prices_.price(rows); }, chain_chances(limit),
                                                           others, draft_price())
                                       .depth
                                 : limit;
    if (want == 0) return chosen_;
    const auto t0 = std::chrono::steady_clock::now();
    drafter_->draft_tree(context, want, candidates, width_, guess_);
    if (!guess_.empty()) {
        const double per_token = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / double(want);
        draft_seconds_ = draft_seconds_ > 0 ? 0.8 * draft_seconds_ + 0.2 * per_token : per_token;
    }
    choose(others, limit);
    return chosen_;
}

void Speculation::observe(const DraftTree& tree, int32_t node, int32_t depth, int32_t drawn) {
    auto& kept = kept_[depth_class(depth)];
    auto& missed = missed_[depth_class(depth)];
    int32_t rank = 0;
    for (size_t c = 0; c < tree.size() && rank < kMaxDraftWidth; ++c) {
        if (tree.parent[c] != node) continue;
        if (tree.tokens[c] == drawn) {
            kept[size_t(rank)] += 1;
            return;
        }
        missed[size_t(rank++)] += 1;
    }
}

void Speculation::verified(std::span<const int32_t> path, int32_t next) {
    if (!chosen_.empty() || (!guess_.empty() && next >= 0))
        for (Counts* counts : {&kept_, &missed_})
            for (auto& by_rank : *counts)
                for (double& c : by_rank) c *= kDecay;
    if (!chosen_.empty()) {
        drafter_->accepted(static_cast<int32_t>(path.size()));
        int32_t node = -1;
        for (size_t k = 0; k <= path.size(); ++k) {
            const int32_t drawn = k < path.size() ? chosen_.tokens[size_t(path[k])] : next;
            if (drawn < 0) break;
            observe(chosen_, node, int32_t(k), drawn);
            if (k < path.size()) node = path[k];
        }
    } else if (!guess_.empty() && next >= 0) {
        observe(guess_, -1, 0, next);  // the shadow guess, against the token the plain step drew
    }
    guess_.clear();
    chosen_.clear();
}

}  // namespace strata::runtime
