#pragma once
// The scheduler's clients (a server's peer address; "" for callers that do not say): which
// have requests accepted and not done, and what each was served lately, in tokens evaluated
// for it plus a charge per request started, older steps counting less. The scheduler admits
// requests and orders prompt chunks least-served client first, and counts a client served
// lately as one to share with, so that a client between two requests keeps its place.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace strata::runtime {

class ClientShares {
public:
    // Service halves every this many steps.
    static constexpr int kHalfLifeSteps = 8;
    // A request costs more than its tokens (the exchange, its prompt's templating, its first
    // pass): counted as this many, so that a client of many tiny requests is not the lightest.
    static constexpr int64_t kRequestTokens = 16;

    // A request of `client` accepted; it is done (finished, failed or cancelled).
    void accepted(const std::string& client) { ++outstanding_[client]; }
    void done(const std::string& client);
    // A request of `client` started.
    void admitted(const std::string& client) { served(client, kRequestTokens); }
    // `tokens` evaluated for `client` in this step.
    void served(const std::string& client, int64_t tokens);
    // After each step: older service counts less; a client whose service fell below one
    // token is forgotten.
    void end_step();
    // Nothing queued or running: nobody to be fair to.
    void forget() { service_.clear(); }
    double service(const std::string& client) const;
    // Clients with requests accepted and not done, or served lately; with `besides`, only
    // those other than it.
    size_t active(const std::string* besides = nullptr) const;

    // The sequences one client may run while `clients` are active: the whole batch alone,
    // else `per_client` (0: an equal share of the batch, at least one).
    static int batch_share(int max_batch, int per_client, size_t clients);
    // While clients share: whether a prompt chunk of `take` tokens, from a client served
    // `service`, joins a step of `tokens` tokens whose least-served decoding client was served
    // `lightest_decoder`. Up to cpu::kDecodeTokens tokens a pass reads the weights once for
    // all of them; past that it costs several times more. So a chunk takes a cheap step past
    // that only for a client lighter than every client decoding in it; others join a step
    // already past it or one they keep within it, and wait meanwhile (their service decays).
    static bool may_join(int64_t tokens, int64_t take, double service, double lightest_decoder);
    // While clients share: of the clients with a sequence running, the one served less than
    // kLightShare of each other one's service, if any. While it has a sequence, steps carry
    // only its sequences, as cheap as when it is alone; the others' sequences sit out (they keep
    // their KV and their service decays meanwhile).
    static constexpr double kLightShare = 0.5;
    std::optional<std::string> light(const std::vector<std::string_view>& running) const;
    // A sequence left out of a step (sitting out for a light client, or its prompt chunk
    // waiting to join) is left out at most this many steps in a row: nobody starves.
    static constexpr int kMaxWaitSteps = 8;

private:
    std::unordered_map<std::string, int> outstanding_;
    std::unordered_map<std::string, double> service_;
};

}  // namespace strata::runtime
