"""What the `strata serve` benchmarks (serve_latency.py, soak.py) share: the flags naming the
server (a running one, or one to start on a free loopback port), and percentiles of the
latencies they measure."""
from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
from urllib.parse import urlparse

HERE = os.path.dirname(os.path.abspath(__file__))


def add_server_args(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("-m", "--model", help="GGUF file (default: strata's default model)")
    ap.add_argument("--strata", default=os.path.join(HERE, "..", "build", "strata"))
    ap.add_argument("--url", help="an already running server instead of starting one")


def parse_args(ap: argparse.ArgumentParser) -> tuple[argparse.Namespace, list[str]]:
    """(the parsed flags, the flags for a started server: those after `--`)."""
    args, extra = ap.parse_known_args()
    return args, [a for a in extra if a != "--"]


def server(args: argparse.Namespace, extra: list[str]) -> tuple[subprocess.Popen | None, str, int]:
    """The server --url names, or one started here with the `extra` flags: (process or None, host, port)."""
    if args.url:
        u = urlparse(args.url)
        return None, u.hostname, u.port or 80
    proc, port = start_server(args.strata, args.model, extra)
    return proc, "127.0.0.1", port


def start_server(strata: str, model: str | None, extra: list[str]) -> tuple[subprocess.Popen, int]:
    """`strata serve` on a free loopback port, once it is listening: (process, port)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [strata, "serve", "--port", str(port), *(["-m", model] if model else []), *extra]
    print("+ " + " ".join(cmd), file=sys.stderr)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    if not proc.stdout.readline():  # the "serving ... at URL" line, printed once listening
        raise SystemExit(f"strata serve exited with {proc.wait()}")
    return proc, port


def percentile(values: list[float], p: float) -> float:
    """The p-th percentile, interpolated between the closest ranks; NaN when there are no values."""
    if not values:
        return float("nan")
    s = sorted(values)
    k = (len(s) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)
