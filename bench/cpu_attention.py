#!/usr/bin/env python3
"""CPU attention beside the device (FastDecode/NEO) against the device attending to a KV cache
copied in per layer: a batch decoding at depth, the two measured in alternating runs.

    python3 bench/cpu_attention.py [--strata build/strata] [-m MODEL] [-b BATCH] [--depths 8192,16384,32768]
                                   [-n N_GEN] [--rounds K] [--device sim|cuda] [--gpu-mem SIZE] [--link GBPS]

For each depth it runs `strata bench -b BATCH -d DEPTH -p 0 -n N_GEN -r 1 --spec off --json` with
`--attention cpu` (the KV cache in DRAM, the CPU attending to one sub-batch while the device runs
the other's matmuls) and `--attention gpu` (the device attending: to the KV cache in its memory
where the plan holds it there, else in DRAM with each layer's blocks copied in; the last column
says which) in turn, K rounds, and prints the medians measured and predicted for each, the ratio
of CPU attention to device attention, and the load average while they ran (the machine may be
shared).
The synthetic 1.1B of the benchmarks: `bench/make_synthetic_gguf.py --shape tinyllama-1.1b`.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess

from common import default_model, log


def bench(a: argparse.Namespace, depth: int, attention: str) -> dict:
    cmd = [a.strata, "bench", "-m", a.model, "-b", str(a.batch), "-d", str(depth), "-p", "0", "-n", str(a.n_gen),
           "-r", "1", "--spec", "off", "--json", "--device", a.device, "--attention", attention]
    if a.gpu_mem:
        cmd += ["--gpu-mem", a.gpu_mem]
    if a.device == "sim":
        cmd += ["--sim-link", a.link]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {run.stderr.strip()[-600:]}")
    rows = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    return next(r for r in rows if r["test"].startswith("tg"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--strata", default="build/strata")
    ap.add_argument("-m", "--model", default=default_model())
    ap.add_argument("-b", "--batch", type=int, default=16)
    ap.add_argument("--depths", default="8192,16384,32768")
    ap.add_argument("-n", "--n-gen", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--device", default="sim")
    ap.add_argument("--gpu-mem", default="")
    ap.add_argument("--link", default="8")
    a = ap.parse_args()
    print(f"model {os.path.basename(a.model)}, batch {a.batch}, --device {a.device}"
          + (f" --gpu-mem {a.gpu_mem}" if a.gpu_mem else "") + (f" --sim-link {a.link}" if a.device == "sim" else ""))
    print("| depth | CPU attention t/s | predicted | measured / predicted | device attention t/s | predicted "
          "| measured / predicted | CPU / device | load average | the device's KV cache |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for depth in (int(d) for d in a.depths.split(",")):
        runs: dict[str, list[dict]] = {"cpu": [], "gpu": []}
        loads = []
        for k in range(a.rounds):
            for attention in ("cpu", "gpu"):
                log(f"depth {depth}, round {k + 1}: --attention {attention}")
                runs[attention].append(bench(a, depth, attention))
                loads.append(os.getloadavg()[0])
        med = {s: statistics.median(r["avg_ts"] for r in rows) for s, rows in runs.items()}
        pred = {s: statistics.median(r["predicted_ts"] for r in rows) for s, rows in runs.items()}
        where = runs["gpu"][0].get("kv_cache", "?")
        print(f"| {depth} | {med['cpu']:.1f} | {pred['cpu']:.1f} | {med['cpu'] / pred['cpu']:.2f} | {med['gpu']:.1f} "
              f"| {pred['gpu']:.1f} | {med['gpu'] / pred['gpu']:.2f} | {med['cpu'] / med['gpu']:.2f} "
              f"| {statistics.median(loads):.1f} | {where} |")


if __name__ == "__main__":
    main()
