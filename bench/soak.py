#!/usr/bin/env python3
"""Soak test of `strata serve`: a bounded mixed load for a while, watching the server's memory
and descriptors.

    python3 bench/soak.py --minutes 30 [-m MODEL | --url http://HOST:PORT [--pid PID]]
                          [--clients 4] [--burst 16] [--burst-every 30] [--json] [-- SERVER FLAGS]

Without --url it starts `build/strata serve` on a free loopback port (flags after `--` go to
it, e.g. `-- -t 4 --max-batch 8`) and stops it at the end, checking it exits 0. With --url
the server's process is found from its listening port (same machine), or given with --pid.

--clients threads loop over a mix of requests on every route the server has: chat and
completions, streamed and not (greedy and sampled, 8 to 48 tokens); tool calls and JSON-schema
output (streamed or not); log-probabilities (chat and completions); /v1/embeddings; /tokenize,
/detokenize and /apply-template; streams the client abandons after two events (the server must
cancel them), and invalid requests (malformed JSON, out-of-range fields, unknown URLs) that
must get a 4xx. (The server has no Ollama routes, so none are exercised.) Every --burst-every seconds, --burst requests arrive at once (a 429, or a 503
`queue_full` when the scheduler's queue is full, is an acceptable answer to those: both are
overload answers with Retry-After, not failures). Every 10 s the server's RSS (VmRSS) and open descriptors are
sampled with /health's running and queued counts.

The report (Markdown, or one JSON object with --json) gives requests by kind and status,
client errors, p50/p99 latency per kind, and RSS and descriptors over time: first, last, max
and growth per hour (a least-squares slope over the second half of the samples: RSS rises at
first as the KV cache's pages are first touched, then levels off). The exit code is 1 when the server died, answered 5xx (other than a 503 `queue_full`), or a client
saw a broken connection it did not cause.
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import socket
import struct
import sys
import threading
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor

from serve_bench import add_server_args, parse_args, percentile, server

TOPICS = ["the sea", "a cat", "winter", "bread", "a robot", "the moon", "trains", "a garden", "music", "rain"]
SAMPLE_EVERY_S = 10
WEATHER_TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
PERSON_SCHEMA = {"type": "json_schema", "json_schema": {"name": "person", "strict": True, "schema": {
    "type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["name", "age"]}}}


def slope_per_hour(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, value) points, per hour."""
    if len(points) < 2:
        return float("nan")
    n = len(points)
    mx = sum(t for t, _ in points) / n
    my = sum(v for _, v in points) / n
    var = sum((t - mx) ** 2 for t, _ in points)
    if var == 0:
        return float("nan")
    return sum((t - mx) * (v - my) for t, v in points) / var * 3600


class Target:
    def __init__(self, host: str, port: int, pid: int | None):
        self.host, self.port, self.pid = host, port, pid

    def conn(self, timeout: float = 300) -> http.client.HTTPConnection:
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def get(self, path: str) -> tuple[int, bytes]:
        c = self.conn(30)
        try:
            c.request("GET", path)
            r = c.getresponse()
            return r.status, r.read()
        finally:
            c.close()

    def rss_kib(self) -> int | None:
        try:
            with open(f"/proc/{self.pid}/status") as f:
                return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
        except (OSError, StopIteration, TypeError):
            return None

    def fds(self) -> int | None:
        try:
            return len(os.listdir(f"/proc/{self.pid}/fd"))
        except (OSError, TypeError):
            return None


def pid_listening_on(port: int) -> int | None:
    """The process holding the listening TCP socket on `port`, from /proc (same machine only)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                for line in list(f)[1:]:
                    cols = line.split()
                    if int(cols[1].rsplit(":", 1)[1], 16) == port and cols[3] == "0A":  # LISTEN
                        inodes.add(cols[9])
        except OSError:
            pass
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:[") and link[8:-1] in inodes:
                    return int(pid)
        except OSError:
            continue
    return None


# A 503 whose error code says the scheduler's queue was full: an overload answer, not a failure.
QUEUE_FULL = "503 queue_full"


def error_code(body: bytes) -> str | None:
    try:
        return json.loads(body)["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return None


def start_then_reset(s: socket.socket, path: str, body: bytes) -> int | str | None:
    """Sends a streamed request on `s`, reads up to its second event, then closes `s` with a reset
    (a client vanishing mid-stream); the answer's status (QUEUE_FULL for that 503), None without one."""
    s.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    got = b""
    while got.count(b"data: ") < 2:
        chunk = s.recv(65536)
        if not chunk:
            break
        got += chunk
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()
    if not got.startswith(b"HTTP/1.1 "):
        return None
    status = int(got.split(b" ", 2)[1])
    return QUEUE_FULL if status == 503 and b'"queue_full"' in got else status


class Load:
    """The mixed requests and what came of them."""

    def __init__(self, target: Target, seed: int):
        self.t = target
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.status: Counter = Counter()          # (kind, status)
        self.latency: dict[str, list[float]] = defaultdict(list)
        self.errors: Counter = Counter()          # client-side exceptions by kind and type
        self.examples: list[str] = []

    def record(self, kind: str, status, seconds: float | None = None, note: str = "") -> None:
        with self.lock:
            self.status[(kind, status)] += 1
            if seconds is not None and status == 200:
                self.latency[kind].append(seconds)
            if note and len(self.examples) < 10:
                self.examples.append(f"{kind}: {note}")

    def connection_error(self, kind: str, e: Exception) -> None:
        """A request the client could not complete: the connection broke or was refused."""
        with self.lock:
            self.errors[(kind, type(e).__name__)] += 1
        self.record(kind, "connection error", note=repr(e))

    def body(self, chat: bool, stream: bool, rng: random.Random) -> dict:
        topic = rng.choice(TOPICS)
        b = {"max_tokens": rng.choice([8, 16, 32, 48]), "stream": stream}
        if rng.random() < 0.5:
            b["temperature"] = 0
        else:
            b.update(temperature=0.8, top_p=0.95, seed=rng.randrange(1 << 31))
        if chat:
            b["messages"] = [{"role": "user", "content": f"Write one sentence about {topic}."}]
        else:
            b["prompt"] = f"A short story about {topic}:"
        return b

    def complete(self, kind: str, chat: bool, stream: bool, rng: random.Random, extra: dict | None = None,
                 path: str | None = None, body: dict | None = None) -> None:
        path = path or ("/v1/chat/completions" if chat else "/v1/completions")
        if body is None:
            body = {**self.body(chat, stream, rng), **(extra or {})}
        c = self.t.conn()
        t0 = time.perf_counter()
        try:
            c.request("POST", path, body=json.dumps(body),
                      headers={"Content-Type": "application/json"})
            r = c.getresponse()
            data = r.read()
            if r.status == 200 and stream and not data.rstrip().endswith(b"data: [DONE]"):
                self.record(kind, "incomplete stream", note=data[-200:].decode(errors="replace"))
                return
            if r.status == 200 and stream and b'"error"' in data:
                self.record(kind, "error event", note=data[-300:].decode(errors="replace"))
                return
            if r.status == 503 and error_code(data) == "queue_full":
                self.record(kind, QUEUE_FULL)
                return
            self.record(kind, r.status, time.perf_counter() - t0,
                        note="" if r.status < 500 else data[:300].decode(errors="replace"))
        except (OSError, http.client.HTTPException) as e:
            self.connection_error(kind, e)
        finally:
            c.close()

    def abandon(self, rng: random.Random) -> None:
        """A stream the client resets after its first events."""
        kind = "stream abandoned"
        body = self.body(rng.random() < 0.5, True, rng)
        body.update(max_tokens=200, ignore_eos=True)
        path = "/v1/chat/completions" if "messages" in body else "/v1/completions"
        data = json.dumps(body).encode()
        try:
            s = socket.create_connection((self.t.host, self.t.port), timeout=300)
            self.record(kind, start_then_reset(s, path, data) or "no answer")
        except OSError as e:
            self.connection_error(kind, e)

    def invalid(self, rng: random.Random) -> None:
        kind = "invalid"
        method, path, body = rng.choice([
            ("POST", "/v1/chat/completions", b'{"messages": ['),
            ("POST", "/v1/completions", b'{"prompt": "hi", "temperature": 9}'),
            ("POST", "/v1/completions", b'{"prompt": "hi", "max_tokens": 100000000}'),
            ("POST", "/v1/chat/completions", b'{"messages": [{"role": "wizard", "content": "x"}]}'),
            ("POST", "/v1/completions", b"[" * 5000 + b"]" * 5000),
            ("GET", "/v1/embeddings", None),
            ("GET", "/v1/chat/completions", None),
        ])
        c = self.t.conn(60)
        t0 = time.perf_counter()
        try:
            c.request(method, path, body=body, headers={"Content-Type": "application/json"})
            r = c.getresponse()
            r.read()
            ok = 400 <= r.status < 500
            self.record(kind, r.status, note="" if ok else f"{method} {path} -> {r.status}")
            with self.lock:
                self.latency[kind].append(time.perf_counter() - t0)
        except (OSError, http.client.HTTPException) as e:
            self.connection_error(kind, e)
        finally:
            c.close()

    def one(self, rng: random.Random) -> None:
        x = rng.random()
        stream = rng.random() < 0.5
        if x < 0.18:
            self.complete("chat", True, False, rng)
        elif x < 0.32:
            self.complete("chat stream", True, True, rng)
        elif x < 0.42:
            self.complete("completion", False, False, rng)
        elif x < 0.50:
            self.complete("completion stream", False, True, rng)
        elif x < 0.57:
            self.complete("tools" + " stream" * stream, True, stream, rng, {"tools": [WEATHER_TOOL], "max_tokens": 48,
                                                                          "tool_choice": rng.choice(["auto", "required"])})
        elif x < 0.64:
            self.complete("json schema" + " stream" * stream, True, stream, rng, {"response_format": PERSON_SCHEMA, "max_tokens": 48})
        elif x < 0.70:
            chat = rng.random() < 0.5
            self.complete("logprobs" + " stream" * stream, chat, stream, rng,
                          {"logprobs": True, "top_logprobs": 3} if chat else {"logprobs": 3})
        elif x < 0.77:
            texts = [f"{rng.choice(TOPICS)} {i}" for i in range(rng.randint(1, 4))]
            self.complete("embeddings", False, False, rng, path="/v1/embeddings", body={"input": texts})
        elif x < 0.83:
            route = rng.choice(["/tokenize", "/detokenize", "/apply-template"])
            body = {"/tokenize": {"content": f"Hello {rng.choice(TOPICS)}", "with_pieces": True},
                    "/detokenize": {"tokens": [rng.randrange(1, 1000) for _ in range(8)]},
                    "/apply-template": {"messages": [{"role": "user", "content": "hi"}]}}[route]
            self.complete("token routes", False, False, rng, path=route, body=body)
        elif x < 0.91:
            self.abandon(rng)
        else:
            self.invalid(rng)

    def burst(self, n: int) -> None:
        def go(i: int) -> None:
            self.complete("burst", i % 2 == 0, i % 3 == 0, random.Random(self.rng.random()))
        with ThreadPoolExecutor(n) as pool:
            list(pool.map(go, range(n)))


def sample(t: Target, t0: float) -> dict:
    row = {"t": time.time() - t0, "rss_kib": t.rss_kib(), "fds": t.fds(), "running": None, "queued": None}
    try:
        status, data = t.get("/health")
        if status == 200:
            h = json.loads(data)
            row.update(running=h["running"], queued=h["queued"])
    except (OSError, ValueError):
        pass
    return row


def report(load: Load, samples: list[dict], seconds: float, died: str | None, as_json: bool) -> dict:
    kinds = sorted({k for k, _ in load.status})
    statuses = sorted({s for _, s in load.status}, key=str)
    lat = {k: {"n": len(v), "p50_s": percentile(v, 50), "p99_s": percentile(v, 99)} for k, v in load.latency.items()}
    rss = [(s["t"], s["rss_kib"]) for s in samples if s["rss_kib"] is not None]
    fds = [(s["t"], s["fds"]) for s in samples if s["fds"] is not None]
    # The KV cache's pages are touched as contexts first grow: judge growth on the second half.
    warm = [p for p in rss if p[0] >= seconds / 2] or rss
    summary = {
        "seconds": seconds,
        "requests": sum(load.status.values()),
        "by_kind_status": {f"{k} {s}": n for (k, s), n in sorted(load.status.items(), key=str)},
        "client_errors": {f"{k} {e}": n for (k, e), n in load.errors.items()},
        "latency": lat,
        "rss_kib": {"first": rss[0][1] if rss else None, "last": rss[-1][1] if rss else None,
                    "max": max(v for _, v in rss) if rss else None, "growth_kib_per_hour": slope_per_hour(warm)},
        "fds": {"first": fds[0][1] if fds else None, "last": fds[-1][1] if fds else None,
                "max": max(v for _, v in fds) if fds else None},
        "samples": samples,
        "server_died": died,
        "examples": load.examples,
    }
    if as_json:
        print(json.dumps(summary))
        return summary
    print(f"## Soak: {seconds / 60:.1f} minutes, {summary['requests']} requests\n")
    print("| kind | " + " | ".join(str(s) for s in statuses) + " |")
    print("| --- | " + " | ".join("---:" for _ in statuses) + " |")
    for k in kinds:
        print(f"| {k} | " + " | ".join(str(load.status.get((k, s), 0)) for s in statuses) + " |")
    print("\n| kind | answers | p50 latency (s) | p99 latency (s) |\n| --- | ---: | ---: | ---: |")
    for k, v in sorted(lat.items()):
        print(f"| {k} | {v['n']} | {v['p50_s']:.3f} | {v['p99_s']:.3f} |")
    r, f = summary["rss_kib"], summary["fds"]
    if rss:
        print("\n| server | first | last | max | growth per hour (2nd half) |\n| --- | ---: | ---: | ---: | ---: |")
        print(f"| RSS (MiB) | {r['first'] / 1024:.1f} | {r['last'] / 1024:.1f} | {r['max'] / 1024:.1f} "
              f"| {r['growth_kib_per_hour'] / 1024:+.1f} |")
        print(f"| descriptors | {f['first']} | {f['last']} | {f['max']} | |")
        print("\nRSS over time (MiB): " + ", ".join(f"{t / 60:.1f} min {v / 1024:.1f}" for t, v in rss[:: max(1, len(rss) // 12)]))
    else:
        print("\n(no RSS samples: the server's process was not found; pass --pid)")
    if summary["client_errors"]:
        print(f"\nclient-side errors: {summary['client_errors']}")
    if load.examples:
        print("\nexamples of failures:\n" + "\n".join(f"- {e}" for e in load.examples))
    if died:
        print(f"\n**the server died**: {died}")
    return summary


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=30)
    add_server_args(ap)
    ap.add_argument("--pid", type=int, help="with --url: the server's process id")
    ap.add_argument("--clients", type=int, default=4, help="threads sending requests one after another")
    ap.add_argument("--burst", type=int, default=16, help="requests sent at once every --burst-every seconds")
    ap.add_argument("--burst-every", type=float, default=30)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    args, extra = parse_args(ap)

    proc, host, port = server(args, extra)
    target = Target(host, port, proc.pid if proc else args.pid or pid_listening_on(port))

    load = Load(target, args.seed)
    samples: list[dict] = []
    t0 = time.time()
    end = t0 + args.minutes * 60
    stop = threading.Event()
    died = None

    def sampler() -> None:
        while not stop.is_set():
            samples.append(sample(target, t0))
            stop.wait(SAMPLE_EVERY_S)

    def client(i: int) -> None:
        rng = random.Random(args.seed * 1000 + i)
        while time.time() < end and not stop.is_set():
            load.one(rng)

    def bursts() -> None:
        while not stop.wait(args.burst_every) and time.time() < end:
            load.burst(args.burst)

    watchers = [threading.Thread(target=sampler), threading.Thread(target=bursts)]
    for w in watchers:
        w.start()
    try:
        with ThreadPoolExecutor(args.clients) as pool:
            list(pool.map(client, range(args.clients)))
    finally:
        stop.set()
        for w in watchers:
            w.join()
    samples.append(sample(target, t0))
    seconds = time.time() - t0
    if proc:
        if proc.poll() is not None:
            died = f"exit code {proc.returncode} during the run"
        else:
            proc.terminate()
            code = proc.wait(120)
            if code != 0:
                died = f"exit code {code} after SIGTERM"
    elif target.pid and not os.path.exists(f"/proc/{target.pid}"):
        died = "the process is gone"
    summary = report(load, samples, seconds, died, args.json)
    server_errors = sum(n for (_, s), n in load.status.items() if not (isinstance(s, int) and s < 500) and s != QUEUE_FULL)
    unexpected = sum(n for (k, _), n in load.errors.items())
    return 1 if died or server_errors or unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
