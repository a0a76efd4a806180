#!/usr/bin/env python3
"""Time to first token of `strata serve` under 1, 4 and 16 concurrent streaming clients.

    python3 bench/serve_latency.py [-m MODEL] [--url http://HOST:PORT] [--clients 1,4,16]
                                   [--requests 4] [--max-tokens 64] [--prompt-words 200] [--json]

Without --url it starts `build/strata serve` on a free loopback port (extra server flags after
`--`, e.g. `-- --max-batch 16 -t 8`) and stops it afterwards. For each concurrency C, C clients
each send --requests streamed /v1/completions requests one after another (different prompts of
about --prompt-words words, greedy, --max-tokens tokens with ignore_eos so every answer has
the same length). TTFT is the time from sending a request to its first chunk with text; the
table gives p50 and p99 over the C x requests answers, and the aggregate generated tokens/s.
"""
from __future__ import annotations

import argparse
import http.client
import json
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

from common import words
from serve_bench import add_server_args, parse_args, percentile, server


def prompt(i: int, n_words: int) -> str:
    return f"Request {i}: " + words(i, n_words)


def one_request(host: str, port: int, body: dict) -> tuple[float, int]:
    """(seconds to the first text, chunks with text) of one streamed completion."""
    conn = http.client.HTTPConnection(host, port, timeout=600)
    t0 = time.perf_counter()
    conn.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError(f"HTTP {resp.status}: {resp.read()[:300]!r}")
    ttft, n = None, 0
    for raw in resp:
        line = raw.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        event = json.loads(line[6:])
        if event.get("choices") and event["choices"][0].get("text"):
            n += 1
            if ttft is None:
                ttft = time.perf_counter() - t0
    conn.close()
    return (ttft if ttft is not None else float("nan")), n


def run_level(host: str, port: int, clients: int, args) -> dict:
    def client(c: int) -> list[float]:
        out = []
        for r in range(args.requests):
            body = {"prompt": prompt(c * 1000 + r, args.prompt_words), "max_tokens": args.max_tokens,
                    "temperature": 0, "ignore_eos": True, "stream": True}
            out.append(one_request(host, port, body)[0])
        return out

    t0 = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        ttfts = [t for ts in pool.map(client, range(clients)) for t in ts]
    secs = time.perf_counter() - t0
    return {"clients": clients, "requests": len(ttfts), "ttft_p50_s": percentile(ttfts, 50),
            "ttft_p99_s": percentile(ttfts, 99), "ttft_mean_s": statistics.fmean(ttfts),
            "tokens_per_s": len(ttfts) * args.max_tokens / secs, "seconds": secs}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_server_args(ap)
    ap.add_argument("--clients", default="1,4,16")
    ap.add_argument("--requests", type=int, default=4, help="requests per client")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--prompt-words", type=int, default=200)
    ap.add_argument("--json", action="store_true")
    args, extra = parse_args(ap)

    proc, host, port = server(args, extra)
    try:
        one_request(host, port, {"prompt": "warm up", "max_tokens": 4, "stream": True})
        rows = [run_level(host, port, int(c), args) for c in args.clients.split(",")]
    finally:
        if proc:
            proc.terminate()
            proc.wait(60)
    if args.json:
        for r in rows:
            print(json.dumps(r))
        return
    print(f"| clients | requests | TTFT p50 (ms) | TTFT p99 (ms) | tokens/s (all clients) |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r['clients']} | {r['requests']} | {r['ttft_p50_s'] * 1000:.0f} | {r['ttft_p99_s'] * 1000:.0f} "
              f"| {r['tokens_per_s']:.1f} |")


if __name__ == "__main__":
    main()
