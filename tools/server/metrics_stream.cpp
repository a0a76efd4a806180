#include "tools/server/metrics_stream.h"

#include <httplib.h>

#include <chrono>
#include <thread>

#include <nlohmann/json.hpp>

#include "tools/server/peer_socket.h"
#include "tools/server/server_state.h"

namespace strata::server {

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kTick = std::chrono::milliseconds(200);
constexpr auto kHeartbeat = std::chrono::seconds(1);
// A stream holds a worker thread: it ends now and then, and EventSource-style clients reconnect.
constexpr auto kMaxStream = std::chrono::minutes(10);

nlohmann::json tier(uint64_t used, uint64_t budget) { return {{"used", used}, {"budget", budget}}; }

}  // namespace

std::string live_figures(const runtime::SchedulerStats& s) {
    const runtime::TierGauges& g = s.tiers;
    nlohmann::json experts = nullptr;
    if (g.has_expert_cache) {
        const uint64_t chosen = g.expert_hits + g.expert_misses;
        experts = {{"hits", g.expert_hits}, {"misses", g.expert_misses},
                   {"hit_rate", chosen ? static_cast<double>(g.expert_hits) / static_cast<double>(chosen) : 0.0}};
    }
    const nlohmann::json j = {
        {"running", s.running},
        {"queued", s.queued},
        {"requests_done", s.requests_done},
        {"prompt_tokens", s.prompt_tokens},
        {"cached_tokens", s.cached_tokens},
        {"generated_tokens", s.generated_tokens},
        {"tokens_per_s", s.busy_seconds > 0 ? static_cast<double>(s.generated_tokens) / s.busy_seconds : 0.0},
        {"tiers", {{"gpu", tier(g.gpu_used, g.gpu_budget)}, {"dram", tier(g.dram_used, g.dram_budget)},
                   {"nvme", {{"used", g.nvme_used}, {"read", g.nvme_read}}}}},
        {"kv_blocks", {{"used", g.kv_blocks_used}, {"total", g.kv_blocks}}},
        {"experts", experts},
    };
    return j.dump();
}

void handle_metrics_stream(ServerState& state, httplib::Response& res) {
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    const Clock::time_point opened = Clock::now();
    res.set_chunked_content_provider("text/event-stream", [&state, opened](size_t, httplib::DataSink& sink) {
        const int fd = current_connection_socket();
        std::string last;
        Clock::time_point sent{};
        while (!state.stopping.load() && Clock::now() - opened < kMaxStream && !peer_closed(fd)) {
            const Clock::time_point now = Clock::now();
            std::string figures = live_figures(state.models.stats());
            if (figures != last || now - sent >= kHeartbeat) {
                // The time stamp (seconds since the stream opened) lets the page turn counters into rates.
                const double t = std::chrono::duration<double>(now - opened).count();
                const std::string event = "data: {\"t\":" + nlohmann::json(t).dump() + "," + figures.substr(1) + "\n\n";
                if (!sink.write(event.data(), event.size())) return false;
                last = std::move(figures);
                sent = now;
            }
            std::this_thread::sleep_for(kTick);
        }
        sink.done();
        return true;
    });
}

}  // namespace strata::server
