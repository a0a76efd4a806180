#!/usr/bin/env python3
"""Strata and llama.cpp side by side: the same GGUF files, threads and tests.

    python3 bench/compare.py [--strata build/strata] [--llama-bench PATH] [-p 512] [-n 128]
                             [-t THREADS] [-r REPS] [--markdown] MODEL.gguf [MODEL.gguf ...]

For each model it runs `strata bench --json` and llama.cpp's own `llama-bench -o jsonl` with the
same -p/-n/-t/-r, one after the other, and prints one row per model and test: tokens/s of each
(mean ± sample stddev over REPS) and the ratio Strata / llama.cpp. For tg rows it adds each
engine's decode bandwidth efficiency: weight bytes read per token (the same file, as `strata
bench` counts them) x tokens/s / the DRAM read rate of the profile Strata planned with (run
`strata probe` first so that is this machine's). Under the table: llama.cpp's version and the
CMake flags it was built with.
llama-bench is the one bench/build_llamacpp.sh builds (CPU, native flags, AMX off), run with its
defaults otherwise (weight repacking on, KV cache F16). Both tools warm up each test once
before timing it; pp<P> evaluates P tokens from an empty cache in one batch, tg<N> N single
tokens one after another.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from common import cache_dir

HERE = os.path.dirname(os.path.abspath(__file__))
# Where bench/build_llamacpp.sh leaves its binaries.
LLAMA_BENCH = os.path.join(os.environ.get("STRATA_PEER_DIR") or cache_dir("peer"), "build", "bin", "llama-bench")


def run_json(cmd: list[str]) -> list[dict]:
    print("+ " + " ".join(cmd), file=sys.stderr)
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def test_name(r: dict) -> str:
    """A llama-bench record's test as llama-bench's table and `strata bench` name it: pp512, tg128."""
    return f"pp{r['n_prompt']}" if r["n_gen"] == 0 else f"tg{r['n_gen']}"


def peer_note(llama_bench: str, records: list[dict]) -> str:
    """One line: llama-bench's version, and the source and CMake flags bench/build_llamacpp.sh
    wrote beside it (build-info.txt, `key: value` lines)."""
    version = f"b{records[0]['build_number']} ({records[0]['build_commit']})" if records else "?"
    info = os.path.join(os.path.dirname(llama_bench), "build-info.txt")
    if not os.path.exists(info):
        return f"llama.cpp: {llama_bench} {version}, build flags unknown (no build-info.txt beside it)"
    with open(info) as f:
        built = dict(line.rstrip("\n").split(": ", 1) for line in f)
    return f"llama.cpp: llama-bench {version} from {built['source']}, built with `cmake {built['cmake']}`"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+")
    ap.add_argument("--strata", default=os.path.join(HERE, "..", "build", "strata"))
    ap.add_argument("--llama-bench", default=LLAMA_BENCH, help="llama.cpp's llama-bench (default: %(default)s)")
    ap.add_argument("-p", "--n-prompt", type=int, default=512)
    ap.add_argument("-n", "--n-gen", type=int, default=128)
    ap.add_argument("-t", "--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("-r", "--reps", type=int, default=5)
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = ap.parse_args()
    if not os.access(args.llama_bench, os.X_OK):
        sys.exit(f"compare: no llama-bench at {args.llama_bench}: run bench/build_llamacpp.sh (or pass --llama-bench)")
    common = ["-p", str(args.n_prompt), "-n", str(args.n_gen), "-t", str(args.threads), "-r", str(args.reps)]

    rows = []
    peer_records = []
    for model in args.models:
        if not os.path.exists(model):
            sys.exit(f"compare: no such model file: {model}")
        strata = {r["test"]: r for r in run_json([args.strata, "bench", "-m", model, *common, "--json"])}
        records = run_json([args.llama_bench, "-m", model, *common, "-o", "jsonl"])
        peer_records += records
        peer = {test_name(r): r for r in records}
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
        print(f"\n{peer_note(args.llama_bench, peer_records)}")
        tg = next((s for _, _, _, s, _ in rows if "dram_read_gbps" in s), None)
        if tg:
            print(f"\nDRAM read rate used for the efficiency: {tg['dram_read_gbps']:.2f} GB/s, from {tg['profile']}")
        return
    print(f"{'model':<36} {'test':>6} {'strata t/s':>18} {'llama.cpp t/s':>18} {'ratio':>7} {'eff s/l':>11}")
    for name, mtype, test, s, p in rows:
        eff = f"{efficiency(s, s)}/{efficiency(s, p)}" if "weight_bytes_per_token" in s else "-"
        print(f"{name[:36]:<36} {test:>6} {ts(s):>18} {ts(p):>18} {ratio(s, p):>7} {eff:>11}")
    print(peer_note(args.llama_bench, peer_records))


if __name__ == "__main__":
    main()
