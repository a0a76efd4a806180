#pragma once
// GET /v1/metrics/stream: the engine's live figures as server-sent events, one JSON object per
// event: the queue, tokens, each memory tier's bytes (GPU, DRAM, NVMe), the KV cache's blocks
// and the expert cache's hits. An event goes out within kTick of a change and at least every
// second (so a client that left is noticed); the stream ends after kMaxStream (the page
// reconnects) or when the server stops.
#include <string>

#include "runtime/scheduler.h"

namespace httplib {
struct Response;
}  // namespace httplib

namespace strata::server {

struct ServerState;

// The figures of one event, without its time stamp (equal objects: nothing changed).
std::string live_figures(const runtime::SchedulerStats& s);

void handle_metrics_stream(ServerState& state, httplib::Response& res);

}  // namespace strata::server
