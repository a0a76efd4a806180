#!/usr/bin/env python3
"""`strata serve` under load it must refuse rather than hang on: 150 slow clients that send part
of a request and go quiet (a well-behaved client is still answered while they hold their
connections, and they get 408 at their deadline), the connection limits in all and per
address (503 and 429 with Retry-After, answered at once), every worker busy (probes still
answered, extra requests refused with 503), one address holding too many requests (429), and
the scheduler's queue shared between addresses (one over its share gets 429, everyone once the
queue is full 503), and SIGTERM with a stream running past --shutdown-timeout (it ends with a clear error event and
[DONE]). Slow clients bind other loopback addresses (127.0.0.x) so that per-address limits
apply to them and not to the well-behaved client on 127.0.0.1."""
from __future__ import annotations

import json
import signal
import socket
import threading
import time

from serve_support import Server, check_error_shape, sse_events
from strata_support import default_model

MODEL = default_model()
ORDINARY = {"prompt": "Once upon a time", "max_tokens": 4, "temperature": 0}
# Holds its place until the test lets go: most of a context of 8192 tokens decoded one a pass
# (drafted tokens, lookup decoding, made a greedy answer of 4000 finish in seconds, before a
# loaded machine's checks were done), 30 s or more at SmolLM2's 250 tokens/s on two cores.
LONG = {"prompt": "Once upon a time", "max_tokens": 8000, "temperature": 0, "ignore_eos": True}
HOLDS = ("--ctx", "8192", "--spec", "off")  # the flags of a server that LONG holds


def connect_from(server: Server, address: str, timeout: float = 60) -> socket.socket:
    s = socket.socket()
    s.settimeout(timeout)
    s.bind((address, 0))
    s.connect(("127.0.0.1", server.port))
    return s


def post_head(body: bytes, path: str = "/v1/completions") -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()


def read_answer(s: socket.socket) -> bytes:
    """Everything the server sends until it closes (or resets) the connection."""
    out = b""
    try:
        while chunk := s.recv(65536):
            out += chunk
    except (ConnectionResetError, socket.timeout):
        pass
    return out


def status_of(raw: bytes) -> int:
    return int(raw.split(b" ", 2)[1]) if raw.startswith(b"HTTP/1.1 ") else 0


def header_of(raw: bytes, name: str) -> str | None:
    head = raw.split(b"\r\n\r\n", 1)[0].decode(errors="replace")
    for line in head.split("\r\n")[1:]:
        k, _, v = line.partition(":")
        if k.strip().lower() == name.lower():
            return v.strip()
    return None


def body_of(raw: bytes):
    return json.loads(raw.split(b"\r\n\r\n", 1)[1])


def check_refusal(raw: bytes, status: int, code: str) -> None:
    assert status_of(raw) == status, raw[:400]
    assert header_of(raw, "Retry-After") == "1", raw[:400]
    check_error_shape(body_of(raw), status, status, code=code)


def metric(server: Server, name: str) -> float:
    _, _, text = server.request("GET", "/metrics")
    return sum(float(l.split()[-1]) for l in text.splitlines() if l.startswith(name) and not l.startswith("#"))


def check_slow_clients() -> None:
    """150 clients hold half-sent requests; a normal request is answered meanwhile, then they time out."""
    deadline_s = 20
    with Server(MODEL, "--timeout", str(deadline_s), "--header-timeout", str(deadline_s), threads=2) as server:
        body = json.dumps(ORDINARY).encode()
        slow = []
        for i in range(150):
            s = connect_from(server, f"127.0.0.{2 + i % 3}", timeout=deadline_s + 30)
            if i % 3 == 0:
                s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # headers never end
            elif i % 3 == 1:
                s.sendall(post_head(body) + body[:5])  # the body never ends
            # else: connected, nothing sent
            slow.append(s)
        t0 = time.time()
        status, _, reply = server.request("POST", "/v1/completions", ORDINARY, timeout=deadline_s - 5)
        assert status == 200 and reply["choices"][0]["text"], (status, reply)
        assert server.request("GET", "/health", timeout=deadline_s - 5)[0] == 200
        # Answered while every slow client still held its connection.
        assert metric(server, "strata_connections_open") >= 150, server.stderr()[-2000:]
        assert time.time() - t0 < deadline_s, "the slow clients' deadline passed before the answer"
        answers = [read_answer(s) for s in slow]
        for s in slow:
            s.close()
        for i, raw in enumerate(answers):
            if i % 3 == 2:
                assert raw == b"", raw[:200]  # nothing sent: closed without an answer
            else:
                assert status_of(raw) == 408, (i, raw[:300])
                check_error_shape(body_of(raw), 408, 408, code="request_timeout")
        assert metric(server, "strata_requests_timed_out_total") >= 100
        assert server.request("POST", "/v1/completions", ORDINARY)[0] == 200
        assert server.stop() == 0, server.stderr()
    print("slow clients: ok")


def check_connection_limits() -> None:
    with Server(MODEL, "--max-connections", "6", "--max-connections-per-client", "4", threads=2) as server:
        held = [connect_from(server, "127.0.0.5") for _ in range(4)]
        time.sleep(0.3)  # accepted and counted
        extra = connect_from(server, "127.0.0.5", timeout=10)
        check_refusal(read_answer(extra), 429, "too_many_connections_from_client")
        held += [connect_from(server, "127.0.0.6") for _ in range(2)]
        time.sleep(0.3)
        over = connect_from(server, "127.0.0.7", timeout=10)
        check_refusal(read_answer(over), 503, "too_many_connections")
        for s in held + [extra, over]:
            s.close()
        time.sleep(0.3)
        assert server.request("POST", "/v1/completions", ORDINARY)[0] == 200
        assert metric(server, 'strata_requests_rejected_total{reason="client_connections"}') >= 1
        assert metric(server, 'strata_requests_rejected_total{reason="connections"}') >= 1
        assert server.stop() == 0, server.stderr()
    print("connection limits: ok")


def check_busy_workers() -> None:
    """One worker, held by a long request: probes still answer; extra requests get 503 or 429 at once."""
    with Server(MODEL, *HOLDS, "--http-threads", "1", "--max-batch", "1", "--max-queue", "0", "--max-requests-per-client", "1",
                threads=2) as server:
        holder = connect_from(server, "127.0.0.1")
        holder.sendall(post_head(json.dumps(LONG).encode()) + json.dumps(LONG).encode())
        deadline = time.time() + 30
        while server.request("GET", "/health")[2]["running"] == 0:
            assert time.time() < deadline, "the long request never started"
            time.sleep(0.05)
        for path in ("/health", "/metrics", "/v1/models"):
            assert server.request("GET", path, timeout=10)[0] == 200, path
        # The same address again: over its one request.
        same = connect_from(server, "127.0.0.1", timeout=10)
        same.sendall(post_head(json.dumps(ORDINARY).encode()) + json.dumps(ORDINARY).encode())
        check_refusal(read_answer(same), 429, "too_many_requests_from_client")
        # Other addresses: one may wait for the worker, the rest are refused.
        results: dict[int, bytes] = {}

        def one(i: int) -> None:
            s = connect_from(server, f"127.0.0.{10 + i}", timeout=60)
            s.sendall(post_head(json.dumps(ORDINARY).encode()) + json.dumps(ORDINARY).encode())
            results[i] = read_answer(s)
            s.close()

        threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        deadline = time.time() + 30
        while len(results) < 3:
            assert time.time() < deadline, results
            time.sleep(0.05)
        refused = [r for r in results.values() if status_of(r) == 503]
        assert len(refused) >= 3, results
        for r in refused:
            check_refusal(r, 503, "server_busy")
        holder.close()  # cancels the long request: the waiting one is answered (200, or 503 while the place frees)
        for t in threads:
            t.join()
        assert all(status_of(r) in (200, 503) for r in results.values()), results  # 503: the cancelled one still held its place
        assert metric(server, 'strata_requests_rejected_total{reason="workers"}') >= 3
        assert metric(server, 'strata_requests_rejected_total{reason="client_requests"}') >= 1
        assert server.stop() == 0, server.stderr()
    print("busy workers: ok")


def check_queue_shares() -> None:
    """One place, held by a long request; a queue of 8 (2 per address while others have work):
    an address's third waiting request gets 429, a request once 8 wait gets 503 queue_full. More
    choices than the place and the queue together hold is a 400 naming `n`, not a busy server."""
    # -v: the scheduler's log, for a failure's message.
    with Server(MODEL, *HOLDS, "--max-batch", "1", "--max-queue", "8", "-v", threads=2) as server:
        status, _, body = server.request("POST", "/v1/completions", {**ORDINARY, "n": 10})
        assert status == 400 and body["error"]["param"] == "n" and "at most 9" in body["error"]["message"], body
        assert server.request("POST", "/v1/completions", {**ORDINARY, "n": 9})[0] == 200
        # A request counts as running until its answer has been handed over, a moment after the
        # client has it: wait for that, or "running" below could be the choices just answered, and
        # the waiting requests, served less than the holder's address, would go before it.
        deadline = time.time() + 30
        while (health := server.request("GET", "/health")[2])["running"] + health["queued"] > 0:
            assert time.time() < deadline, health
            time.sleep(0.02)
        holder = connect_from(server, "127.0.0.1")
        holder.sendall(post_head(json.dumps(LONG).encode()) + json.dumps(LONG).encode())
        waiting: list[socket.socket] = []

        def send_from(address: str) -> socket.socket:
            s = connect_from(server, address, timeout=30)
            head = post_head(json.dumps(ORDINARY).encode()).replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n")
            s.sendall(head + json.dumps(ORDINARY).encode())
            return s

        def wait_queued(n: int) -> None:
            deadline = time.time() + 30
            while (health := server.request("GET", "/health")[2])["queued"] < n:
                if time.time() >= deadline:
                    # What the server answered the last request and the one holding the place, if it did.
                    for s in (waiting[-1], holder):
                        s.settimeout(0.5)
                    log = "\n".join(l for l in server.stderr().splitlines() if "GET /health" not in l)
                    raise AssertionError(f"never {n} queued: /health {health}; the last request's answer "
                                         f"{read_answer(waiting[-1])[:400]!r}; the holder's answer "
                                         f"{read_answer(holder)[-600:]!r}; the server's log past its polls: {log[-3000:]}")
                time.sleep(0.02)

        deadline = time.time() + 30
        while server.request("GET", "/health")[2]["running"] == 0:
            assert time.time() < deadline, "the long request never started"
            time.sleep(0.05)
        for i, address in enumerate(["127.0.0.2", "127.0.0.2", "127.0.0.3", "127.0.0.3", "127.0.0.4", "127.0.0.4"]):
            waiting.append(send_from(address))
            wait_queued(i + 1)
        over = send_from("127.0.0.2")
        check_refusal(read_answer(over), 429, "too_many_requests_from_client")
        for i, address in enumerate(["127.0.0.5", "127.0.0.5"]):
            waiting.append(send_from(address))
            wait_queued(7 + i)
        full = send_from("127.0.0.6")
        check_refusal(read_answer(full), 503, "queue_full")
        assert metric(server, 'strata_requests_rejected_total{reason="client_queue"}') >= 1
        assert metric(server, 'strata_requests_rejected_total{reason="queue_full"}') >= 1
        for s in [holder, *waiting]:
            s.close()
        assert server.stop() == 0, server.stderr()
    print("queue shares: ok")


def check_sigterm_deadline() -> None:
    """A stream still running when --shutdown-timeout passes ends with an error event and [DONE]."""
    with Server(MODEL, *HOLDS, "--shutdown-timeout", "1", threads=2) as server:
        idle = connect_from(server, "127.0.0.1")
        conn = server.connection()
        conn.request("POST", "/v1/completions", body=json.dumps({**LONG, "stream": True}),
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        events = sse_events(resp)
        assert json.loads(next(events))["object"] == "text_completion"
        server.proc.send_signal(signal.SIGTERM)
        rest = list(events)
        assert rest[-1] == "[DONE]", rest[-3:]
        error = json.loads(rest[-2])
        check_error_shape(error, 503, error["error"].get("status", 503), code="server_shutting_down")
        assert read_answer(idle) == b""  # an idle connection is closed, not kept open
        assert server.proc.wait(30) == 0, server.stderr()
    print("SIGTERM deadline: ok")


def main() -> None:
    check_connection_limits()
    check_busy_workers()
    check_queue_shares()
    check_sigterm_deadline()
    check_slow_clients()
    print("ok")


if __name__ == "__main__":
    main()
