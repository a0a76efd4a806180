#pragma once
// A request as the scheduler runs it (runtime/scheduler.h): shared by its files.
#include <chrono>
#include <memory>
#include <span>
#include <vector>

#include "runtime/scheduler.h"
#include "runtime/spec/speculation.h"

namespace strata::runtime {

using Clock = std::chrono::steady_clock;

struct Scheduler::Job {
    uint64_t id = 0;
    Request request;
    bool cancelled = false;
    SeqId seq = -1;
    int32_t max_len = 0;  // KV positions the request may come to hold
    // What its sequence must hold before it decodes: the prompt, or after a preemption the
    // prompt and the tokens generated so far but the last (recomputed, mostly from cache).
    std::vector<int32_t> replay;
    size_t fed = 0;       // tokens of context() in the KV cache (attached or evaluated)
    size_t chunk = 0;     // tokens of context() in this step's pass
    int waited = 0;       // steps in a row it was left out while clients share (ClientShares)
    int32_t next = -1;    // the last sampled token, evaluated in the next step
    std::unique_ptr<Generation> generation;  // null for an embedding
    std::unique_ptr<Speculation> spec;       // its drafts' choices, when it speculates
    std::vector<int32_t> verify;             // this step's pass: next, then the draft tokens
    std::vector<int32_t> parents;            // of each of them: its parent's index (-1 for next)
    std::vector<float> pooled;  // an embedding job's hidden states pooled so far
    GenerateResult result;
    Clock::time_point started, first_token;
    bool finished = false;

    const std::vector<int32_t>& context() const { return replay.empty() ? request.prompt : replay; }
    bool prefilling() const { return fed < context().size(); }
    // Positions it takes past what it holds to go on: its next token's, none for a prompt only.
    int32_t next_positions() const { return request.prompt_only() ? 0 : 1; }
    // The draft tokens in this step's pass.
    std::span<const int32_t> drafted() const { return verify.empty() ? std::span<const int32_t>{} : std::span(verify).subspan(1); }
    // What its next prompt chunk asks the pass for.
    PassOutput output() const {
        if (request.on_prompt_logits) return PassOutput::AllLogits;
        if (!request.embed) return PassOutput::Logits;
        if (*request.embed == Pooling::Mean) return PassOutput::SumHidden;
        return *request.embed == Pooling::First && fed == 0 ? PassOutput::FirstHidden : PassOutput::LastHidden;
    }
};

}  // namespace strata::runtime
