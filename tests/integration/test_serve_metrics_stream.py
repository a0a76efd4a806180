"""GET /v1/metrics/stream (the web page's engine view): server-sent events, one JSON object
each, with the queue, tokens and each tier's bytes. A stream shows a request generating and,
within a second of its answer, no longer; its counts agree with /metrics; it needs the API key
like /metrics; and a server asked to stop ends its open streams and exits instead of waiting
for their clients. The default model, with a reply long enough to be seen running."""
import json
import queue
import sys
import threading
import time

from serve_support import Server, sse_events
from strata_support import default_model

FIELDS = {"t", "running", "queued", "requests_done", "prompt_tokens", "cached_tokens", "generated_tokens", "tokens_per_s",
          "tiers", "kv_blocks", "experts"}


def follow(server: Server, events: queue.Queue, headers=None):
    """Puts (arrival time, event) of the stream on `events` from a thread; returns the response's status."""
    conn = server.connection(timeout=30)
    conn.request("GET", "/v1/metrics/stream", headers=headers or {})
    resp = conn.getresponse()
    if resp.status != 200:
        return resp.status

    def read():
        try:
            for data in sse_events(resp):
                events.put((time.time(), json.loads(data)))
        except OSError:
            pass
        events.put((time.time(), None))  # the stream ended

    threading.Thread(target=read, daemon=True).start()
    return resp.status


def wait_event(events: queue.Queue, test, timeout: float):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            at, event = events.get(timeout=max(0.0, deadline - time.time()))
        except queue.Empty:
            break
        if event is None or test(event):
            return at, event
    raise AssertionError(f"no such event within {timeout} s")


def prometheus(server: Server) -> dict:
    text = server.request("GET", "/metrics")[2]
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line and not line.startswith("#")}


def main() -> int:
    model = default_model()
    with Server(model) as server:
        events: queue.Queue = queue.Queue()
        assert follow(server, events) == 200
        _, first = wait_event(events, lambda e: True, 5)
        assert first is not None and set(first) == FIELDS, first
        assert first["running"] == 0 and first["experts"] is None
        assert set(first["tiers"]) == {"gpu", "dram", "nvme"} and first["tiers"]["dram"]["used"] > 0

        # A request generating, then within a second of its answer, not.
        answer = {}
        # Long enough (seconds on two cores) for the stream's 200 ms ticks to see it running.
        body = {"prompt": "Once upon a time", "max_tokens": 1024, "temperature": 0, "ignore_eos": True}
        worker = threading.Thread(target=lambda: answer.update(reply=server.request("POST", "/v1/completions", body)))
        worker.start()
        wait_event(events, lambda e: e["running"] == 1, 30)
        worker.join(120)
        answered = time.time()
        status, _, reply = answer["reply"]
        assert status == 200, reply
        at, idle = wait_event(events, lambda e: e["running"] == 0, 5)
        assert idle is not None and at - answered < 1.0, f"the stream said so {at - answered:.2f} s after the answer"
        assert idle["generated_tokens"] - first["generated_tokens"] == reply["usage"]["completion_tokens"]
        # Quiet: the stream and /metrics agree.
        m = prometheus(server)
        assert idle["generated_tokens"] == m["strata_generated_tokens_total"]
        assert idle["tiers"]["dram"]["used"] == m['strata_memory_used_bytes{tier="dram"}']
        assert idle["kv_blocks"]["used"] == m["strata_kv_blocks_used"]
        # At least one event a second while nothing changes (a client that left is noticed).
        at1, _ = wait_event(events, lambda e: True, 2)
        at2, _ = wait_event(events, lambda e: True, 2)
        assert at2 - at1 < 1.5

        # Stopping: the open stream ends and the server exits, not waiting for the client.
        stopped = time.time()
        assert server.stop(timeout=10) == 0, server.stderr()
        assert time.time() - stopped < 5, f"the server took {time.time() - stopped:.1f} s to stop with a stream open"
        wait_event(events, lambda e: False, 5)  # returns at the stream's end

    with Server(model, "--api-key", "k") as server:
        assert follow(server, queue.Queue()) == 401
        events = queue.Queue()
        assert follow(server, events, {"Authorization": "Bearer k"}) == 200
        assert wait_event(events, lambda e: True, 5)[1] is not None
    print("ok: the metrics stream follows the engine, agrees with /metrics, needs the key, ends when the server stops")
    return 0


if __name__ == "__main__":
    sys.exit(main())
