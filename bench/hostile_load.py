#!/usr/bin/env python3
"""A well-behaved client's latency on `strata serve` while hostile clients attack it.

    python3 bench/hostile_load.py [-m MODEL | --url http://HOST:PORT] [--requests 60]
                                  [--slowloris 300] [--vanishers 4] [--flooders 8]
                                  [--oversized 2] [--json] [-- SERVER FLAGS]

Without --url it starts `build/strata serve` on a free loopback port (flags after `--` go to
it). The well-behaved client (the `openai` package, from 127.0.0.1, no retries) sends
--requests chat completions one after another (greedy, 16 tokens, different prompts): first on
the idle server, then again while, at the same time,

- --slowloris clients (from 127.0.0.2 to .4) open a connection, send part of the headers or
  headers and part of a body, then one byte every 2 s; when the server cuts them they reconnect;
- --vanishers clients (127.0.0.5) start 200-token streams and reset the connection after the
  second event;
- --flooders threads (127.0.0.6) send tiny requests back to back: /health, /v1/models,
  /tokenize and 1-token completions (429 and 503 are fair answers to them);
- --oversized threads (127.0.0.7) send 2 MiB bodies and bodies announcing 100 GB (413 expected).

The report gives the well-behaved client's p50/p99 latency idle and under attack, its failures
(any exception or non-200 is one), what the attackers got, and the server's RSS and open
descriptors before and after. Exit code 1 when the well-behaved client saw a failure or its
loaded p99 exceeds twice its idle p99. Attackers bind other loopback addresses, so the server's
per-address limits apply to them and not to the well-behaved client: run it on Linux, where all
of 127/8 is loopback.
"""
from __future__ import annotations

import argparse
import json
import random
import selectors
import socket
import sys
import threading
import time
from collections import Counter

import openai

from serve_bench import add_server_args, parse_args, percentile, server
from soak import Target, pid_listening_on, start_then_reset

TOPICS = ["the sea", "a cat", "winter", "bread", "a robot", "the moon", "trains", "a garden", "music", "rain"]


class Attack:
    def __init__(self, host: str, port: int):
        self.host, self.port = host, port
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.got: Counter = Counter()  # (attacker, outcome)
        self.threads: list[threading.Thread] = []

    def count(self, who: str, what) -> None:
        with self.lock:
            self.got[(who, str(what))] += 1

    def connect(self, source: str, timeout: float = 10) -> socket.socket:
        s = socket.socket()
        s.settimeout(timeout)
        s.bind((source, 0))
        s.connect((self.host, self.port))
        return s

    def start(self, target, *args) -> None:
        t = threading.Thread(target=target, args=args, daemon=True)
        t.start()
        self.threads.append(t)

    def slowloris(self, n: int) -> None:
        """n half-sent requests at all times, on one thread (non-blocking sockets)."""
        sel = selectors.DefaultSelector()
        body = json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}).encode()
        heads = [b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n",
                 b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body[:3]]
        live: dict[socket.socket, float] = {}

        def open_one(i: int) -> None:
            try:
                s = self.connect(f"127.0.0.{2 + i % 3}")
                s.sendall(heads[i % 2])
                s.setblocking(False)
                sel.register(s, selectors.EVENT_READ)
                live[s] = time.time()
            except OSError as e:
                self.count("slowloris", type(e).__name__)

        for i in range(n):
            open_one(i)
        i = n
        while not self.stop.is_set():
            for key, _ in sel.select(timeout=0.5):
                s = key.fileobj
                try:
                    data = s.recv(4096)
                    self.count("slowloris", data.split(b" ", 2)[1].decode() if data.startswith(b"HTTP/1.1 ") else "closed")
                except OSError as e:
                    self.count("slowloris", type(e).__name__)
                sel.unregister(s)
                s.close()
                live.pop(s, None)
                open_one(i)  # replaced at once
                i += 1
            now = time.time()
            for s, last in list(live.items()):
                if now - last >= 2:
                    try:
                        s.send(b"X")  # a byte every 2 s: never a whole request
                    except OSError:
                        pass
                    live[s] = now
        for s in live:
            s.close()

    def vanisher(self) -> None:
        req = {"prompt": "Once upon a time", "max_tokens": 200, "stream": True, "ignore_eos": True}
        body = json.dumps(req).encode()
        while not self.stop.is_set():
            try:
                self.count("vanisher", start_then_reset(self.connect("127.0.0.5"), "/v1/completions", body) or "closed")
            except OSError as e:
                self.count("vanisher", type(e).__name__)
                time.sleep(0.1)

    def flooder(self, seed: int) -> None:
        rng = random.Random(seed)
        while not self.stop.is_set():
            kind = rng.choice(["health", "models", "tokenize", "completion"])
            if kind == "health":
                req = b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
            elif kind == "models":
                req = b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
            else:
                body = json.dumps({"content": "flood"} if kind == "tokenize" else {"prompt": "Hi", "max_tokens": 1}).encode()
                path = b"/tokenize" if kind == "tokenize" else b"/v1/completions"
                req = b"POST %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %d\r\n\r\n" % (path, len(body)) + body
            self.exchange("flooder", "127.0.0.6", req)

    def oversized(self) -> None:
        big = b'{"prompt": "' + b"x" * (2 << 20) + b'"}'
        while not self.stop.is_set():
            self.exchange("oversized", "127.0.0.7",
                          b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(big) + big)
            self.exchange("oversized", "127.0.0.7",
                          b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000000\r\n\r\n{")

    def exchange(self, who: str, source: str, data: bytes) -> None:
        try:
            with self.connect(source) as s:
                try:
                    s.sendall(data)
                except OSError:
                    pass  # answered and closed before all of it was sent
                got = s.recv(64)
                self.count(who, got.split(b" ", 2)[1].decode() if got.startswith(b"HTTP/1.1 ") else "closed")
        except OSError as e:
            self.count(who, type(e).__name__)


def well_behaved(base_url: str, n: int, offset: int) -> tuple[list[float], list[str]]:
    client = openai.OpenAI(base_url=base_url, api_key="none", max_retries=0, timeout=120)
    latencies, failures = [], []
    model = client.models.list().data[0].id  # the server's default model, by its name
    for i in range(n):
        t0 = time.perf_counter()
        try:
            r = client.chat.completions.create(
                model=model, messages=[{"role": "user", "content": f"Write about {TOPICS[(i + offset) % len(TOPICS)]}. ({i})"}],
                max_tokens=16, temperature=0)
            if not r.choices[0].message.content and r.choices[0].finish_reason != "length":
                failures.append(f"request {i}: empty answer")
        except Exception as e:  # any failure counts: the point is that there are none
            failures.append(f"request {i}: {type(e).__name__}: {e}")
        latencies.append(time.perf_counter() - t0)
    return latencies, failures


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_server_args(ap)
    ap.add_argument("--requests", type=int, default=60, help="well-behaved requests per phase")
    ap.add_argument("--slowloris", type=int, default=300)
    ap.add_argument("--vanishers", type=int, default=4)
    ap.add_argument("--flooders", type=int, default=8)
    ap.add_argument("--oversized", type=int, default=2)
    ap.add_argument("--warmup-s", type=float, default=5, help="attack running before the loaded phase starts")
    ap.add_argument("--json", action="store_true")
    args, extra = parse_args(ap)
    proc, host, port = server(args, extra)
    target = Target(host, port, proc.pid if proc else pid_listening_on(port))
    base_url = f"http://{host}:{port}/v1"
    report: dict = {}
    try:
        well_behaved(base_url, 3, 100)  # warm-up, not measured
        rss0, fds0 = target.rss_kib(), target.fds()
        idle, idle_fail = well_behaved(base_url, args.requests, 0)
        attack = Attack(host, port)
        attack.start(attack.slowloris, args.slowloris)
        for _ in range(args.vanishers):
            attack.start(attack.vanisher)
        for k in range(args.flooders):
            attack.start(attack.flooder, k)
        for _ in range(args.oversized):
            attack.start(attack.oversized)
        time.sleep(args.warmup_s)
        fds_attack = target.fds()
        loaded, loaded_fail = well_behaved(base_url, args.requests, 0)
        attack.stop.set()
        until = time.time() + 15
        for t in attack.threads:
            t.join(timeout=max(0.1, until - time.time()))
        time.sleep(2)
        _, metrics = target.get("/metrics")
        report = {
            "idle": {"p50_s": percentile(idle, 50), "p99_s": percentile(idle, 99), "failures": idle_fail},
            "loaded": {"p50_s": percentile(loaded, 50), "p99_s": percentile(loaded, 99), "failures": loaded_fail},
            "attackers": {f"{who} {what}": n for (who, what), n in sorted(attack.got.items())},
            "rss_kib": [rss0, target.rss_kib()], "fds": [fds0, fds_attack, target.fds()],
            "server_metrics": [l for l in metrics.decode().splitlines()
                               if l.startswith(("strata_requests_rejected_total", "strata_requests_timed_out_total",
                                                "strata_requests_cancelled_total"))],
        }
        report["p99_ratio"] = report["loaded"]["p99_s"] / report["idle"]["p99_s"]
    finally:
        if proc:
            proc.terminate()
            code = proc.wait(60)
            report["server_exit"] = code
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print("| well-behaved client | p50 (s) | p99 (s) | failures |\n|---|---|---|---|")
        for phase in ("idle", "loaded"):
            r = report[phase]
            print(f"| {phase} | {r['p50_s']:.3f} | {r['p99_s']:.3f} | {len(r['failures'])} |")
        print(f"\nloaded p99 / idle p99: {report['p99_ratio']:.2f}")
        print("attackers got: " + ", ".join(f"{k}: {n}" for k, n in report["attackers"].items()))
        print(f"server RSS KiB before/after: {report['rss_kib']}; descriptors before/under attack/after: {report['fds']}")
        print("\n".join(report["server_metrics"]))
        for f in report["idle"]["failures"] + report["loaded"]["failures"]:
            print("FAILURE: " + f)
    ok = not report["idle"]["failures"] and not report["loaded"]["failures"] and report["p99_ratio"] <= 2
    return 0 if ok and report.get("server_exit", 0) == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
