#pragma once
// The request the plan is for: how long the prompts are, how many tokens to generate, how
// many sequences there are, and whether to optimise one user's latency or batch throughput.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string_view>

namespace strata::planner {

enum class Objective { Latency, Throughput };

std::string_view objective_name(Objective o);
std::optional<Objective> objective_from_name(std::string_view name);

struct Workload {
    int32_t prompt_len = 512;
    int32_t gen_len = 128;
    // Latency: the sequences decoded together. Throughput: how many sequences there are to
    // process; the planner picks how many of them run in one pass (its block size).
    int32_t batch = 1;
    Objective objective = Objective::Latency;

    // Positions the KV cache holds when more than a request's (a runtime's whole context, while
    // it plans for the prompt it has); 0: prompt and generation.
    int32_t kv_len = 0;
    // Query rows each sequence's decode step computes: 1, or more where a speculative pass
    // verifies a sequence's draft (its last token and the draft's tokens) against one KV cache.
    int32_t decode_rows = 1;

    int32_t context_len() const { return prompt_len + gen_len; }
    int32_t kv_positions() const { return std::max(kv_len, context_len()); }
    // Throws UsageError for non-positive or absurd values.
    void validate() const;
    // Applies "prompt=512,gen=128,batch=8,objective=throughput" (any subset) to *this.
    // Throws UsageError naming the bad item.
    void apply(std::string_view spec);
    bool operator==(const Workload&) const = default;
};

}  // namespace strata::planner
