#!/usr/bin/env python3
"""Batched decoding, Strata against llama.cpp: the aggregate tokens/s of B sequences decoded
together, each already holding a short prompt, on the same file and threads.

    python3 bench/batched_decode.py [-m MODEL] [--strata build/strata] [--batches 1,4,5,8,16]
                                    [-d 32] [-n 32] [-t THREADS] [-r REPS]

Strata: `strata bench -p 0 -n N -d D -b B` (B sequences at depth D, one decoding pass a step for
all of them; the mean of REPS). llama.cpp: its own `llama-batched-bench -npp D -ntg N -npl B`
(bench/build_llamacpp.sh builds it), S_TG: the B sequences' generated tokens over the time
generating them, after their D-token prompts. Both alternate per batch size, llama.cpp first.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys

from common import cache_dir, default_model

HERE = os.path.dirname(os.path.abspath(__file__))
BATCHED_BENCH = os.path.join(os.environ.get("STRATA_PEER_DIR") or cache_dir("peer"), "build", "bin", "llama-batched-bench")


def strata_ts(args, batch: int) -> float:
    cmd = [args.strata, "bench", "-m", args.model, "-p", "0", "-n", str(args.n), "-d", str(args.depth), "-b", str(batch),
           "-t", str(args.threads), "-r", str(args.reps), "--json"]
    print("+ " + " ".join(cmd), file=sys.stderr)
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out)["avg_ts"]


def llamacpp_ts(args, batch: int) -> float:
    ctx = batch * (args.depth + args.n) + 64
    cmd = [args.llama_batched_bench, "-m", args.model, "-c", str(ctx), "-b", "2048", "-ub", "512", "-npp", str(args.depth),
           "-ntg", str(args.n), "-npl", str(batch), "-t", str(args.threads), "--output-format", "jsonl"]
    print("+ " + " ".join(cmd), file=sys.stderr)
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True).stdout
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    if not rows:
        raise RuntimeError(f"llama-batched-bench printed no result: {out[-500:]}")
    return float(rows[-1]["speed_tg"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model", default=default_model())
    ap.add_argument("--strata", default=os.path.join(HERE, "..", "build", "strata"))
    ap.add_argument("--llama-batched-bench", default=BATCHED_BENCH)
    ap.add_argument("--batches", default="1,4,5,8,16")
    ap.add_argument("-d", "--depth", type=int, default=32, help="prompt tokens each sequence holds before decoding")
    ap.add_argument("-n", type=int, default=32, help="tokens each sequence generates")
    ap.add_argument("-t", "--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("-r", "--reps", type=int, default=3, help="Strata's repetitions (llama-batched-bench runs once)")
    args = ap.parse_args()
    if not os.path.exists(args.llama_batched_bench):
        sys.exit(f"{args.llama_batched_bench} is missing: run bench/build_llamacpp.sh first")
    print(f"{os.path.basename(args.model)}, {args.threads} threads, depth {args.depth}, {args.n} tokens each")
    print("| batch | Strata t/s | llama.cpp t/s | Strata / llama.cpp |")
    print("| ---: | ---: | ---: | ---: |")
    for batch in (int(b) for b in args.batches.split(",")):
        peer = llamacpp_ts(args, batch)
        ours = strata_ts(args, batch)
        print(f"| {batch} | {ours:.1f} | {peer:.1f} | {ours / peer:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
