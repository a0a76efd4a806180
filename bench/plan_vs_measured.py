#!/usr/bin/env python3
"""The planner's fidelity: measured / predicted tokens/s for every shape of work, on this machine.

    python3 bench/plan_vs_measured.py [--strata build/strata] [-r 2] [--rounds N] [--device cpu|sim]
                                      [--profile FILE | --cached | --quick] [--only SUBSTRING] [--keep]

Each row runs `strata bench --json` (llama-bench's shapes: pp = one prompt pass, tg = decode
steps, `-d` a KV cache already that deep, `-b` sequences decoded together, `--dram` a budget that
streams layers from disk or spills KV layers to disk) and reads the measured tokens/s beside the
plan's prediction for that very run, which `strata bench` prints (runtime/place/placement.h).

The profile the plans are made from is measured first by a full `strata probe` (about 15 s), kept
out of the user's cache through XDG_CACHE_HOME; `--quick` uses `strata probe --quick` instead,
`--profile FILE` a given one, `--cached` the user's cached profile.

Rows (the synthetic tinyllama-1.1b Q4_0 is written by bench/make_synthetic_gguf.py to /tmp and
deleted afterwards unless --keep or it was there already):
  tinyllama Q4_0   pp512, tg64, and tg32 with --dram a quarter of the file (layers streamed)
  SmolLM2 Q4_1     pp512, tg128, tg64 @ d4096, tg32 x16, and tg32 @ d4096 with --dram holding
                   the weights and part of the KV cache (KV layers spilled to disk)
With --device sim the same rows run on the simulated device (--sim-link, --gpu-mem as given).
The table ends with the spread of measured / predicted; the planner's target is 0.8 to 1.2.
With --rounds N the probe and every row run N times over (a fresh probe each round, unless
--profile or --cached) and the table gives each row's median ratio beside every round's: on a
machine shared with others a row moves by ±15% from one run to the next, and so does a probe.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

from common import default_model

HERE = os.path.dirname(os.path.abspath(__file__))
SMOLLM2 = default_model()
TINY = "/tmp/strata-fidelity-tinyllama-1.1b-Q4_0.gguf"


def rows(tiny: str) -> list[tuple[str, str, list[str]]]:
    third = str(os.path.getsize(tiny) // 3)
    return [
        ("tinyllama-1.1b Q4_0", tiny, ["-p", "512", "-n", "64"]),
        ("tinyllama-1.1b Q4_0, --dram 1/3 (streamed)", tiny, ["-p", "0", "-n", "32", "--dram", third]),
        ("SmolLM2-135M Q4_1", SMOLLM2, ["-p", "512", "-n", "128"]),
        ("SmolLM2-135M Q4_1", SMOLLM2, ["-p", "0", "-n", "64", "-d", "4096"]),
        ("SmolLM2-135M Q4_1", SMOLLM2, ["-p", "0", "-n", "32", "-b", "16"]),
        ("SmolLM2-135M Q4_1, --dram 160M (KV spilled)", SMOLLM2, ["-p", "0", "-n", "32", "-d", "4096", "--dram", "160M"]),
    ]


def bench(strata: str, model: str, args: list[str], reps: int, extra: list[str], env: dict) -> list[dict]:
    cmd = [strata, "bench", "-m", model, "-r", str(reps), "--json", *args, *extra]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError(p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"exit {p.returncode}")
    return [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]


def probe_into(a, cache: str) -> None:
    """The profile the plans are made from: given, the user's cached one, or measured now."""
    os.makedirs(os.path.join(cache, "strata"), exist_ok=True)
    profile = os.path.join(cache, "strata", "hardware.json")
    if a.profile:
        shutil.copy(a.profile, profile)
    else:
        subprocess.run([a.strata, "probe", "--no-cache", "-o", profile, *(["--quick"] if a.quick else [])],
                       check=True, stdout=subprocess.DEVNULL)


def median(xs: list[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--strata", default=os.path.join(HERE, "..", "build", "strata"))
    ap.add_argument("-r", "--reps", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=1,
                    help="probe and run every row this many times; the table gives each row's median")
    ap.add_argument("--device", default="cpu", choices=["cpu", "sim"])
    ap.add_argument("--sim-link", default="8")
    ap.add_argument("--gpu-mem", default=None, help="the simulated device's memory (default: the engine's)")
    ap.add_argument("--only", default=None, help="run only the rows whose label or arguments contain this")
    ap.add_argument("--keep", action="store_true", help="keep the synthetic model")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--profile", help="hardware profile JSON to plan with (default: a full probe now)")
    g.add_argument("--cached", action="store_true", help="plan with the user's cached profile")
    g.add_argument("--quick", action="store_true", help="plan with a quick probe made now")
    a = ap.parse_args()

    env = dict(os.environ)
    cache = None
    if not a.cached:
        cache = tempfile.mkdtemp(prefix="strata-fidelity-")
        env["XDG_CACHE_HOME"] = cache
    made = False
    if not os.path.exists(TINY):
        subprocess.run([sys.executable, os.path.join(HERE, "make_synthetic_gguf.py"), "--shape", "tinyllama-1.1b",
                        "--type", "Q4_0", "-o", TINY], check=True, stdout=subprocess.DEVNULL)
        made = True
    extra = ["--device", a.device]
    if a.device == "sim":
        extra += ["--sim-link", a.sim_link] + (["--gpu-mem", a.gpu_mem] if a.gpu_mem else [])

    # (label, test) -> one (measured, stddev, predicted) per round, in the rows' order.
    results: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    failures: list[str] = []
    try:
        for rnd in range(a.rounds):
            if cache:
                probe_into(a, cache)
            for label, model, args in rows(TINY):
                if a.only and a.only not in label and a.only not in " ".join(args):
                    continue
                try:
                    got = bench(a.strata, model, args, a.reps, extra, env)
                except RuntimeError as e:
                    failures.append(f"round {rnd + 1}: {label} {' '.join(args)}: {e}")
                    continue
                for r in got:
                    results.setdefault((label, r["test"]), []).append((r["avg_ts"], r["stddev_ts"], r["predicted_ts"]))
            if a.rounds > 1:
                print(f"round {rnd + 1} of {a.rounds} done", file=sys.stderr, flush=True)
    finally:
        if made and not a.keep:
            os.remove(TINY)
        if cache:
            shutil.rmtree(cache)

    ratios = []
    if a.rounds == 1:
        print("| model | test | measured t/s | predicted t/s | measured / predicted |")
        print("|---|---|---:|---:|---:|")
    else:
        print(f"| model | test | measured t/s (median of {a.rounds}) | predicted t/s (median) | measured / predicted "
              f"(median) | each round |")
        print("|---|---|---:|---:|---:|---|")
    for (label, test), runs in results.items():
        each = [m / p if p else float("nan") for m, _, p in runs]
        ratio = median(each)
        ratios.append(ratio)
        if a.rounds == 1:
            m, sd, p = runs[0]
            print(f"| {label} | {test} | {m:.1f} ± {sd:.1f} | {p:.1f} | {ratio:.2f} |")
        else:
            print(f"| {label} | {test} | {median([m for m, _, _ in runs]):.1f} | {median([p for _, _, p in runs]):.1f} | "
                  f"{ratio:.2f} | {', '.join(f'{x:.2f}' for x in each)} |")
    for f in failures:
        print(f"failed: {f}")
    if ratios:
        print(f"\nmeasured / predicted: {min(ratios):.2f} .. {max(ratios):.2f} over {len(ratios)} rows "
              f"({sum(0.8 <= x <= 1.2 for x in ratios)} within 0.8-1.2)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
