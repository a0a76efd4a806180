#!/usr/bin/env python3
"""Strata and llama.cpp side by side: the same GGUF files, threads and tests.

    python3 bench/compare.py [--strata build/strata] [-p 512] [-n 128] [-t THREADS] [-r REPS]
                             [--markdown] MODEL.gguf [MODEL.gguf ...]

For each model it runs `strata bench --json` and bench/peer_llamacpp.py --json (llama.cpp
through llama-cpp-python), one after the other, and prints one row per model and test:
tokens/s of each (mean ± sample stddev over REPS) and the ratio Strata / llama.cpp. For tg rows
it adds each engine's decode bandwidth efficiency: weight bytes read per token (the same file,
as `strata bench` counts them) x tokens/s / the DRAM read rate of the profile Strata planned
with (run `strata probe` first so that is this machine's).
Both tools warm up each test once before timing it; see their docstrings for the tests.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run_json(cmd: list[str]) -> list[dict]:
    print("+ " + " ".join(cmd), file=sys.stderr)
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+")
    ap.add_argument("--strata", default=os.path.join(HERE, "..", "build", "strata"))
    ap.add_argument("-p", "--n-prompt", type=int, default=512)
    ap.add_argument("-n", "--n-gen", type=int, default=128)
    ap.add_argument("-t", "--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("-r", "--reps", type=int, default=5)
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = ap.parse_args()
    common = ["-p", str(args.n_prompt), "-n", str(args.n_gen), "-t", str(args.threads), "-r", str(args.reps), "--json"]

    rows = []
    for model in args.models:
        if not os.path.exists(model):
            sys.exit(f"compare: no such model file: {model}")
        strata = {r["test"]: r for r in run_json([args.strata, "bench", "-m", model, *common])}
        peer = {r["test"]: r for r in run_json([sys.executable, os.path.join(HERE, "peer_llamacpp.py"), "-m", model, *common])}
        for test in strata:
            s, p = strata[test], peer.get(test)
            rows.append((os.path.basename(model), s["model_type"], test, s, p))

    def ts(r: dict | None) -> str:
        return f"{r['avg_ts']:.2f} ± {r['stddev_ts']:.2f}" if r else "-"

    def ratio(s: dict, p: dict | None) -> str:
        return f"{s['avg_ts'] / p['avg_ts']:.2f}x" if p and p["avg_ts"] > 0 else "-"

    def efficiency(s: dict, r: dict | None) -> str:
        """Weight bytes per token x r's tokens/s over the DRAM read rate (tg rows only)."""
        if not r or "weight_bytes_per_token" not in s:
            return "-"
        return f"{s['weight_bytes_per_token'] * r['avg_ts'] / 1e9 / s['dram_read_gbps']:.2f}"

    if args.markdown:
        print("| model | type | test | Strata t/s | llama.cpp t/s | Strata / llama.cpp | DRAM efficiency Strata / llama.cpp |")
        print("| --- | --- | --- | ---: | ---: | ---: | ---: |")
        for name, mtype, test, s, p in rows:
            eff = f"{efficiency(s, s)} / {efficiency(s, p)}" if "weight_bytes_per_token" in s else "-"
            print(f"| {name} | {mtype} | {test} | {ts(s)} | {ts(p)} | {ratio(s, p)} | {eff} |")
        tg = next((s for _, _, _, s, _ in rows if "dram_read_gbps" in s), None)
        if tg:
            print(f"\nDRAM read rate used for the efficiency: {tg['dram_read_gbps']:.2f} GB/s, from {tg['profile']}")
        return
    print(f"{'model':<36} {'test':>6} {'strata t/s':>18} {'llama.cpp t/s':>18} {'ratio':>7} {'eff s/l':>11}")
    for name, mtype, test, s, p in rows:
        eff = f"{efficiency(s, s)}/{efficiency(s, p)}" if "weight_bytes_per_token" in s else "-"
        print(f"{name[:36]:<36} {test:>6} {ts(s):>18} {ts(p):>18} {ratio(s, p):>7} {eff:>11}")


if __name__ == "__main__":
    main()
