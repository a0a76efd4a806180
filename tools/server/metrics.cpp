#include "tools/server/metrics.h"

#include <fmt/format.h>

namespace strata::server {

void Metrics::count_response(const std::string& route, int status) {
    std::lock_guard lock(mu_);
    ++responses_[{route, status}];
}

void Metrics::count_cancelled() {
    std::lock_guard lock(mu_);
    ++cancelled_;
}

void Metrics::count_rejected(const std::string& reason) {
    std::lock_guard lock(mu_);
    ++rejected_[reason];
}

void Metrics::count_timed_out() {
    std::lock_guard lock(mu_);
    ++timed_out_;
}

void Metrics::set_open_connections(size_t n) {
    std::lock_guard lock(mu_);
    open_connections_ = n;
}

void Metrics::observe_first_token(double seconds) {
    std::lock_guard lock(mu_);
    ttft_sum_ += seconds;
    ++ttft_count_;
}

namespace {
void metric(std::string& out, const char* name, const char* type, const char* help, double value) {
    out += fmt::format("# HELP {0} {1}\n# TYPE {0} {2}\n{0} {3}\n", name, help, type, value);
}
}  // namespace

std::string Metrics::render(const runtime::SchedulerStats& s, const MemoryUse& dram) const {
    std::string out;
    {
        std::lock_guard lock(mu_);
        out += "# HELP strata_http_responses_total HTTP responses by route and status code.\n"
               "# TYPE strata_http_responses_total counter\n";
        for (const auto& [key, n] : responses_)
            out += fmt::format("strata_http_responses_total{{route=\"{}\",code=\"{}\"}} {}\n", key.first, key.second, n);
        metric(out, "strata_requests_cancelled_total", "counter", "Requests cancelled because the client went away.", cancelled_);
        metric(out, "strata_requests_timed_out_total", "counter", "Requests that did not arrive whole within their deadline (408).",
               timed_out_);
        out += "# HELP strata_requests_rejected_total Requests and connections refused before a handler ran, by reason.\n"
               "# TYPE strata_requests_rejected_total counter\n";
        for (const auto& [reason, n] : rejected_) out += fmt::format("strata_requests_rejected_total{{reason=\"{}\"}} {}\n", reason, n);
        metric(out, "strata_connections_open", "gauge", "Client connections open now.", static_cast<double>(open_connections_));
        out += fmt::format("# HELP strata_time_to_first_token_seconds Time from arrival to the first streamed text.\n"
                           "# TYPE strata_time_to_first_token_seconds summary\n"
                           "strata_time_to_first_token_seconds_sum {}\nstrata_time_to_first_token_seconds_count {}\n",
                           ttft_sum_, ttft_count_);
    }
    metric(out, "strata_requests_running", "gauge", "Sequences generating now.", s.running);
    metric(out, "strata_requests_queued", "gauge", "Requests waiting for a place in the batch.", s.queued);
    // The scheduler's requests: one per choice of a completion (n) and per input of an embedding.
    metric(out, "strata_requests_done_total", "counter", "Sequences finished (each choice and embedding input; cancelled ones too).",
           s.requests_done);
    metric(out, "strata_requests_failed_total", "counter", "Sequences that failed with an error.", s.requests_failed);
    metric(out, "strata_prompt_tokens_total", "counter", "Prompt tokens evaluated.", s.prompt_tokens);
    metric(out, "strata_cached_prompt_tokens_total", "counter", "Prompt tokens whose KV cache was reused.", s.cached_tokens);
    metric(out, "strata_generated_tokens_total", "counter", "Tokens generated.", s.generated_tokens);
    metric(out, "strata_draft_tokens_total", "counter", "Draft tokens verified (speculative decoding).", s.drafted_tokens);
    metric(out, "strata_draft_tokens_accepted_total", "counter", "Draft tokens verified and kept.", s.accepted_tokens);
    metric(out, "strata_busy_seconds_total", "counter", "Seconds spent in forward passes.", s.busy_seconds);
    metric(out, "strata_generated_tokens_per_second", "gauge", "Tokens generated per busy second, since start.",
           s.busy_seconds > 0 ? s.generated_tokens / s.busy_seconds : 0.0);
    // A budget of "no limit" is reported as 0, as Prometheus has no infinity convention for sizes.
    const uint64_t limit = dram.limit == UINT64_MAX ? 0 : dram.limit;
    const runtime::TierGauges& g = s.tiers;
    out += "# HELP strata_memory_budget_bytes Memory budget per tier (0: no limit).\n"
           "# TYPE strata_memory_budget_bytes gauge\n";
    out += fmt::format("strata_memory_budget_bytes{{tier=\"dram\"}} {}\n", limit);
    if (g.gpu_budget) out += fmt::format("strata_memory_budget_bytes{{tier=\"gpu\"}} {}\n", g.gpu_budget);
    out += "# HELP strata_memory_used_bytes Memory reserved per tier now (nvme: what the plan reads from disk).\n"
           "# TYPE strata_memory_used_bytes gauge\n";
    out += fmt::format("strata_memory_used_bytes{{tier=\"dram\"}} {}\n", dram.used);
    if (g.gpu_budget) out += fmt::format("strata_memory_used_bytes{{tier=\"gpu\"}} {}\n", g.gpu_used);
    if (g.nvme_used) out += fmt::format("strata_memory_used_bytes{{tier=\"nvme\"}} {}\n", g.nvme_used);
    if (g.gpu_budget || g.gpu_memory_losses) {
        metric(out, "strata_gpu_memory_lost_total", "counter",
               "Times device memory was taken away mid-run (or a pass found the pool full) and held experts or layers "
               "went to the CPU.",
               static_cast<double>(g.gpu_memory_losses));
        metric(out, "strata_gpu_layers_moved_to_cpu", "gauge", "Layers moved from the device to the CPU for lack of device memory.",
               g.gpu_layers_moved);
        metric(out, "strata_gpu_experts_given_back_total", "counter",
               "Routed experts held on the device given back to the host's CPU for lack of device memory.",
               g.gpu_experts_given_back);
        metric(out, "strata_gpu_left", "gauge",
               "1 when device memory fell below what the device backend's own buffers take and the run went on on the CPU alone.",
               g.gpu_left ? 1 : 0);
    }
    out += "# HELP strata_memory_peak_bytes Most memory reserved per tier.\n# TYPE strata_memory_peak_bytes gauge\n";
    out += fmt::format("strata_memory_peak_bytes{{tier=\"dram\"}} {}\n", dram.peak);
    metric(out, "strata_nvme_read_bytes_total", "counter", "Weight bytes read from disk (streamed layers, offloaded experts).",
           static_cast<double>(g.nvme_read));
    metric(out, "strata_kv_blocks_used", "gauge", "KV cache blocks held by sequences.", g.kv_blocks_used);
    if (g.has_expert_cache) {
        metric(out, "strata_expert_cache_hits_total", "counter", "Offloaded experts chosen and found in DRAM.",
               static_cast<double>(g.expert_hits));
        metric(out, "strata_expert_cache_misses_total", "counter", "Offloaded experts chosen and read from disk.",
               static_cast<double>(g.expert_misses));
    }
    return out;
}

}  // namespace strata::server
