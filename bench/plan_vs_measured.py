#!/usr/bin/env python3
"""Predicted vs measured decode tokens/s for a few placements on this machine.

Runs `strata generate --json` for each case (a model, a --dram budget and optionally a
context size) a few times, and `strata batch` for each batch case, and prints a markdown table: the placement the planner chose, the tokens/s it predicts for that
very run (the prompt and generated lengths of the run, this machine's cached profile) and the
measured tokens/s (median, with min-max over the runs), and the error of the prediction.

    python3 bench/plan_vs_measured.py [--strata build/strata] [--runs 3] [-n 64] [--ctx 512]
                                      [--profile FILE | --cached] [--case MODEL:DRAM[:CTX] ...]
                                      [--batch-case MODEL:B ...] [--keep]

  DRAM is a size strata accepts (100M), 'unlimited', or 'NN%%' of the model file's size; CTX
  overrides --ctx for that case (a larger context with a small budget spills KV layers).
  A batch case runs B requests of the same prompt length through `strata batch --max-batch B`
  (all resident) and compares its aggregate tokens/s (prefill included) with the plan's
  prediction for B sequences decoded together, which `strata batch` prints.
  The plans are made from a profile measured just before (`strata probe`, a few seconds, kept
  out of the user's cache through XDG_CACHE_HOME), from --profile FILE, or with --cached from
  the cached profile a plain `strata generate` would use.
  Default cases: SmolLM2-135M-Instruct Q4_1 from the model cache at unlimited / 100M / 70M,
  and a synthetic tinyllama-1.1b Q8_0 (bench/make_synthetic_gguf.py, written to /tmp and
  deleted afterwards unless --keep) at 100%% / 50%% / 35%% / 25%% of its file size, at 45%% with a
  4096-token context (KV layers spill), and a batch of 8.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import shutil
import subprocess
import sys
import tempfile

from common import default_model

HERE = os.path.dirname(os.path.abspath(__file__))
SMOLLM2 = default_model()
SYNTH = "/tmp/strata-plan-vs-measured-tinyllama-q8_0.gguf"
PROMPT = "The history of the printing press begins"


def dram_arg(spec: str, model: str) -> str | None:
    if spec == "unlimited":
        return None
    if spec.endswith("%"):
        return str(int(os.path.getsize(model) * float(spec[:-1]) / 100))
    return spec


def run_batch(strata: str, model: str, batch: int, n: int, env: dict) -> tuple[float, float]:
    """(measured, predicted) aggregate tokens/s of `strata batch` for `batch` requests."""
    with tempfile.TemporaryDirectory() as tmp:
        src, out = os.path.join(tmp, "in.jsonl"), os.path.join(tmp, "out.jsonl")
        with open(src, "w") as f:
            for i in range(batch):
                body = {"prompt": f"{PROMPT} ({i})", "max_tokens": n, "temperature": 0, "ignore_eos": True}
                f.write(json.dumps({"custom_id": str(i), "method": "POST", "url": "/v1/completions", "body": body}) + "\n")
        p = subprocess.run([strata, "batch", "-m", model, "-i", src, "-o", out, "--max-batch", str(batch)],
                           capture_output=True, text=True, env=env)
        if p.returncode != 0:
            raise RuntimeError(p.stderr.strip().splitlines()[-1])
    measured = predicted = 0.0
    for line in p.stderr.splitlines():
        if "tokens generated," in line:
            measured = float(line.rsplit(",", 1)[1].split()[0])
        if "the plan predicts" in line:
            predicted = float(line.split("the plan predicts", 1)[1].split()[0])
    return measured, predicted


def run_once(strata: str, model: str, dram: str | None, n: int, ctx: int, env: dict) -> dict:
    cmd = [strata, "generate", "-m", model, "-c", str(ctx), "-n", str(n), "--temp", "0", "--ignore-eos",
           "-p", PROMPT, "--json"]
    if dram:
        cmd += ["--dram", dram]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        # A budget too small is a result too: the table shows strata's one-line reason.
        raise RuntimeError(p.stderr.strip().splitlines()[0].removeprefix("strata: error: "))
    return json.loads(p.stdout)


def read_gbps(r: dict) -> float:
    """Streamed bytes per second during decode: one pass per generated token but the last,
    and the prefill's pass (prompts here fit one ubatch) counted out."""
    n = len(r["tokens"])
    if n < 2 or r["memory"]["bytes_streamed"] == 0:
        return 0.0
    per_pass = r["memory"]["bytes_streamed"] / n
    return per_pass * (n - 1) / (n / r["timings"]["decode_tokens_per_s"]) / 1e9


def fmt_range(xs: list[float]) -> str:
    return f"{statistics.median(xs):.1f} ({min(xs):.1f}-{max(xs):.1f})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--strata", default=os.path.join(HERE, "..", "build", "strata"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("-n", type=int, default=64, help="tokens generated per run")
    ap.add_argument("--ctx", type=int, default=512, help="context (sizes the KV cache the budget holds)")
    ap.add_argument("--case", action="append", default=[], help="MODEL:DRAM[:CTX] (repeatable)")
    ap.add_argument("--batch-case", action="append", default=[], help="MODEL:B (repeatable)")
    ap.add_argument("--keep", action="store_true", help="keep the synthetic model")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--profile", help="hardware profile JSON to plan with (default: probe now)")
    g.add_argument("--cached", action="store_true", help="plan with the user's cached profile")
    args = ap.parse_args()

    env = dict(os.environ)
    cache = None
    if not args.cached:
        # strata reads $XDG_CACHE_HOME/strata/hardware.json; models are passed with -m.
        cache = tempfile.mkdtemp(prefix="strata-pvm-")
        os.makedirs(os.path.join(cache, "strata"))
        profile = os.path.join(cache, "strata", "hardware.json")
        if args.profile:
            shutil.copy(args.profile, profile)
        else:
            subprocess.run([args.strata, "probe", "--no-cache", "-o", profile], check=True, stdout=subprocess.DEVNULL)
        env["XDG_CACHE_HOME"] = cache
        with open(profile) as f:
            hw = json.load(f)
        q = {r["type"]: r["gemv_gbps"] for r in hw["cpu"]["rates"]}
        print(f"profile: DRAM read {hw['dram']['read_gbps']:.1f} GB/s, disk read {hw['nvme']['read_gbps']:.2f} GB/s, "
              f"GEMV Q4_1 {q.get('Q4_1', 0):.1f} / Q8_0 {q.get('Q8_0', 0):.1f} GB/s\n")

    def parse_case(c: str) -> tuple[str, str, int]:
        parts = c.split(":")
        if len(parts) == 3 and parts[2].isdigit():
            return parts[0], parts[1], int(parts[2])
        model, dram = c.rsplit(":", 1)
        return model, dram, args.ctx

    cases = [parse_case(c) for c in args.case]
    batch_cases = [(c.rsplit(":", 1)[0], int(c.rsplit(":", 1)[1])) for c in args.batch_case]
    made_synth = False
    if not cases and not batch_cases:
        cases = [(SMOLLM2, d, args.ctx) for d in ("unlimited", "100M", "70M")]
        if not os.path.exists(SYNTH):
            subprocess.run([sys.executable, os.path.join(HERE, "make_synthetic_gguf.py"), "--shape", "tinyllama-1.1b",
                            "--type", "Q8_0", "-o", SYNTH], check=True)
            made_synth = True
        # 25% is below what the output head, embeddings and ring need; 35% is near the floor.
        cases += [(SYNTH, d, args.ctx) for d in ("100%", "50%", "35%", "25%")]
        cases.append((SYNTH, "45%", 4096))
        batch_cases = [(SYNTH, 8)]

    print("| model | --dram | context | layers resident / streamed | KV layers spilled | predicted bottleneck | predicted tok/s "
          "| measured tok/s, median (min-max) | error | streamed GB/s in decode | prefill tok/s predicted / measured |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    try:
        for model, spec, ctx in cases:
            dram = dram_arg(spec, model)
            label = spec if dram is None or not spec.endswith("%") else f"{spec} = {int(dram) / 2**20:.0f} MiB"
            try:
                runs = [run_once(args.strata, model, dram, args.n, ctx, env) for _ in range(args.runs)]
            except RuntimeError as e:
                print(f"| {os.path.basename(model)} | {label} | {ctx} | refused: {e} | | | | | | | |", flush=True)
                continue
            plan = runs[-1]["plan"]
            predicted = statistics.median(r["plan"]["predicted"]["decode_tokens_per_s"] for r in runs)
            measured = [r["timings"]["decode_tokens_per_s"] for r in runs]
            pre_p = statistics.median(r["plan"]["predicted"]["prefill_tokens_per_s"] for r in runs)
            pre_m = statistics.median(r["timings"]["prefill_tokens_per_s"] for r in runs)
            err = (statistics.median(measured) - predicted) / predicted
            gbps = statistics.median(read_gbps(r) for r in runs)
            print(f"| {os.path.basename(model)} | {label} | {ctx} | {plan['layers_resident']} / {plan['layers_streamed']} | "
                  f"{runs[-1]['memory']['kv_layers_spilled']} | "
                  f"{plan['predicted']['decode_bottleneck']} | {predicted:.1f} | {fmt_range(measured)} | {err:+.0%} | "
                  f"{f'{gbps:.2f}' if gbps else '-'} | {pre_p:.0f} / {pre_m:.0f} |", flush=True)
        for model, batch in batch_cases:
            runs = [run_batch(args.strata, model, batch, args.n, env) for _ in range(args.runs)]
            measured = [m for m, _ in runs]
            predicted = statistics.median(p for _, p in runs)
            err = (statistics.median(measured) - predicted) / predicted
            print(f"| {os.path.basename(model)}, batch of {batch} (`strata batch`, prefill included) | unlimited | {args.ctx} | "
                  f"all resident | 0 | - | {predicted:.1f} | {fmt_range(measured)} | {err:+.0%} | - | - |", flush=True)
    finally:
        if made_synth and not args.keep:
            os.remove(SYNTH)
        if cache:
            shutil.rmtree(cache)
    return 0


if __name__ == "__main__":
    sys.exit(main())
