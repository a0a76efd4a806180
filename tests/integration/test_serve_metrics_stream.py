"""GET /v1/metrics/stream (the web page's engine view): server-sent events, one JSON object
each, with the queue, tokens and each tier's bytes. A stream shows a request generating and,
once it is answered, no longer, counting its tokens; its counts agree with /metrics; while
nothing changes it sends its figures again (the heartbeat); it needs the API key like /metrics;
and a server asked to stop ends its open streams and exits while their clients still hold them
open. The default model, with a reply long enough to be seen running."""
import json
import queue
import sys
import threading
import time

from serve_support import Server, sse_events
from strata_support import default_model

FIELDS = {"t", "running", "queued", "requests_done", "prompt_tokens", "cached_tokens", "generated_tokens", "tokens_per_s",
          "tiers", "kv_blocks", "experts"}
# A guard against a hang, not a measure: every wait below ends far sooner on a working server.
PATIENCE = 60


def follow(server: Server, events: queue.Queue, headers=None):
    """Puts each event of the stream on `events` from a thread, then None when the stream ends;
    returns the response's status. The connection stays open until the server ends it."""
    conn = server.connection(timeout=PATIENCE)
    conn.request("GET", "/v1/metrics/stream", headers=headers or {})
    resp = conn.getresponse()
    if resp.status != 200:
        return resp.status

    def read():
        try:
            for data in sse_events(resp):
                events.put(json.loads(data))
        except OSError:
            pass
        events.put(None)

    threading.Thread(target=read, daemon=True).start()
    return resp.status


def next_event(events: queue.Queue, test=lambda e: True):
    """The stream's next event that passes `test`, or None when the stream ended first."""
    deadline = time.time() + PATIENCE
    while True:
        try:
            event = events.get(timeout=max(0.0, deadline - time.time()))
        except queue.Empty:
            raise AssertionError(f"no such event within {PATIENCE} s") from None
        if event is None or test(event):
            return event


def figures(event: dict) -> dict:
    """An event without its time stamp."""
    return {k: v for k, v in event.items() if k != "t"}


def prometheus(server: Server) -> dict:
    text = server.request("GET", "/metrics")[2]
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line and not line.startswith("#")}


def main() -> int:
    model = default_model()
    with Server(model) as server:
        events: queue.Queue = queue.Queue()
        assert follow(server, events) == 200
        first = next_event(events)
        assert first is not None and set(first) == FIELDS, first
        assert first["running"] == 0 and first["experts"] is None
        assert set(first["tiers"]) == {"gpu", "dram", "nvme"} and first["tiers"]["dram"]["used"] > 0

        # A request generating, then, once answered, not.
        answer = {}
        # Long enough (seconds on two cores) for the stream's 200 ms ticks to see it running.
        body = {"prompt": "Once upon a time", "max_tokens": 1024, "temperature": 0, "ignore_eos": True}
        worker = threading.Thread(target=lambda: answer.update(reply=server.request("POST", "/v1/completions", body)))
        worker.start()
        assert next_event(events, lambda e: e["running"] == 1) is not None, "the stream ended"
        worker.join(120)
        status, _, reply = answer["reply"]
        assert status == 200, reply
        # The first event after that with nothing running counts the whole reply.
        idle = next_event(events, lambda e: e["running"] == 0)
        assert idle is not None, "the stream ended"
        assert idle["generated_tokens"] - first["generated_tokens"] == reply["usage"]["completion_tokens"]
        # Quiet: the stream and /metrics agree.
        m = prometheus(server)
        assert idle["running"] == m["strata_requests_running"] == 0
        assert idle["generated_tokens"] == m["strata_generated_tokens_total"]
        assert idle["tiers"]["dram"]["used"] == m['strata_memory_used_bytes{tier="dram"}']
        assert idle["kv_blocks"]["used"] == m["strata_kv_blocks_used"]
        # While nothing changes the stream still sends, the same figures at a later time: the
        # heartbeat, whose failing write is how the server notices a client that left.
        before, again = next_event(events), next_event(events)
        assert before is not None and again is not None, "the stream ended"
        assert figures(again) == figures(before) and again["t"] > before["t"], (before, again)

        # Stopping: the open stream ends and the server exits though this client never closes it.
        assert server.stop(timeout=PATIENCE) == 0, server.stderr()
        assert next_event(events, lambda e: False) is None

    with Server(model, "--api-key", "k") as server:
        assert follow(server, queue.Queue()) == 401
        events = queue.Queue()
        assert follow(server, events, {"Authorization": "Bearer k"}) == 200
        assert next_event(events) is not None
    print("ok: the metrics stream follows the engine, agrees with /metrics, repeats itself while quiet, needs the key, "
          "ends when the server stops")
    return 0


if __name__ == "__main__":
    sys.exit(main())
