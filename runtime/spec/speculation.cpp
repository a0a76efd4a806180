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
    s = s > 0 ? 0.8 * s + 0.2 * seconds : seconds;
}

void PassPrices::plan(int64_t rows, double seconds) {
    if (rows >= 1 && rows <= kMaxRows) planned_[size_t(rows)] = seconds;
}

double PassPrices::price(int64_t rows) const {
    if (rows >= 1 && rows <= kMaxRows && seconds_[size_t(rows)] <= 0 && planned_[size_t(rows)] > 0) return planned_[size_t(rows)];
    for (int64_t r = std::min(rows, kMaxRows); r >= 1; --r)
        if (seconds_[size_t(r)] > 0) return seconds_[size_t(r)];
    return 0;
}

Speculation::Speculation(std::unique_ptr<Drafter> drafter, const PassPrices& prices, int32_t max_depth, bool priced)
    : drafter_(std::move(drafter)), prices_(prices), max_depth_(max_depth), priced_(priced) {}

int32_t Speculation::depth(int64_t others, int32_t proposed) const {
    if (!priced_) return proposed;
    // Nothing priced yet: a plain step first.
    return planner::forecast_speculation([&](int64_t rows) { return prices_.price(rows); }, acceptance(), proposed, others,
                                         draft_price())
        .depth;
}

std::span<const int32_t> Speculation::draft(std::span<const int32_t> context, int64_t others, int32_t limit) {
    limit = static_cast<int32_t>(std::min<int64_t>({int64_t(limit), int64_t(max_depth_), PassPrices::kMaxRows - others - 1}));
    guess_.clear();
    verifying_ = 0;
    if (limit <= 0) return {};
    if (!drafter_->costly()) {
        drafter_->draft(context, limit, guess_);
        verifying_ = size_t(depth(others, static_cast<int32_t>(guess_.size())));
        return std::span(guess_).first(verifying_);
    }
    // A costly drafter guesses only the tokens to verify: as many as would pay if it guessed them.
    const int32_t want = depth(others, limit);
    if (want == 0) return {};
    const auto t0 = std::chrono::steady_clock::now();
    drafter_->draft(context, want, guess_);
    if (!guess_.empty()) {
        const double per_token = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / double(guess_.size());
        draft_seconds_ = draft_seconds_ > 0 ? 0.8 * draft_seconds_ + 0.2 * per_token : per_token;
    }
    verifying_ = guess_.size();
    return guess_;
}

void Speculation::observe(int32_t kept, bool missed) {
    kept_ = kDecay * kept_ + kept;
    missed_ = kDecay * missed_ + (missed ? 1 : 0);
}

void Speculation::verified(int32_t accepted, int32_t next) {
    if (verifying_ > 0) {
        drafter_->accepted(accepted);
        // A miss is counted where the target drew another token than the draft's next.
        observe(accepted, size_t(accepted) < verifying_);
    } else if (!guess_.empty() && next >= 0) {
        observe(guess_[0] == next ? 1 : 0, guess_[0] != next);  // the shadow guess
    }
    guess_.clear();
    verifying_ = 0;
}

}  // namespace strata::runtime
