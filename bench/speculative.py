#!/usr/bin/env python3
"""Speculative decoding measured (docs/speculative.md): on each task of bench/spec_tasks/
(rewrite a 400-word text with two small edits, answer from a given document, a free story),
`strata generate --temp 0` with --spec off and with --spec auto (and lookup, or self: the
model's own first layers drafting), runs alternated,
medians of decode tokens/s and tokens per pass; every speculative run's tokens are checked
against plain decoding's. With --dram the weights stream from the file (layers that do not fit
are read each pass). With --peer, llama.cpp's llama-lookup (bench/build_llamacpp.sh --spec) on
the same prompts: its decode speed and accepted drafts, in the same run.

  bench/speculative.py [-m MODEL] [--dram 60M] [--ctx 2048] [-n 256] [-r 3] [--modes off,auto,lookup,self] [--peer]
                       [--tasks rewrite,document,story] [--raw (no chat template)]

A mode MODE:W runs --spec MODE --spec-width W (auto:1: chains only).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
from pathlib import Path

from common import default_model, log

ROOT = Path(__file__).resolve().parent.parent
TASKS = ROOT / "bench" / "spec_tasks"
CHATML = "<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n"


def mode_flags(mode: str) -> list[str]:
    spec, _, width = mode.partition(":")
    return ["--spec", spec] + (["--spec-width", width] if width else [])


def strata(binary: str, model: str, prompt_file: Path, mode: str, args) -> dict:
    cmd = [binary, "generate", "-m", model, "-f", str(prompt_file), "-n", str(args.n), "--temp", "0", "--ignore-eos",
           "--json", "--ctx", str(args.ctx)] + mode_flags(mode)
    if args.dram:
        cmd += ["--dram", args.dram]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def llama_lookup(peer: Path, model: str, prompt_file: Path, args) -> dict:
    cmd = [str(peer / "llama-lookup"), "-m", model, "-f", str(prompt_file), "-n", str(args.n), "--temp", "0",
           "-c", "2048", "--ignore-eos", "--spec-draft-n-max", "16"]
    err = subprocess.run(cmd, capture_output=True, text=True).stderr
    speed = re.search(r"decoded\s+(\d+) tokens in\s+([\d.]+) seconds", err)
    drafted = re.search(r"n_drafted\s*=\s*(\d+)", err)
    accepted = re.search(r"n_accept\s*=\s*(\d+)", err)
    if not speed:
        raise RuntimeError(f"llama-lookup printed no speed: {err[-800:]}")
    return {"tps": int(speed[1]) / float(speed[2]), "drafted": int(drafted[1]) if drafted else 0,
            "accepted": int(accepted[1]) if accepted else 0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model", default=default_model())
    ap.add_argument("--binary", default=str(ROOT / "build" / "strata"))
    ap.add_argument("--dram", default="", help="DRAM budget below the model's size: layers stream from the file")
    ap.add_argument("-n", type=int, default=256, help="tokens to generate")
    ap.add_argument("--ctx", type=int, default=2048,
                    help="context; a KV cache that does not fit --dram spills to disk (drafts are still trees there)")
    ap.add_argument("-r", "--reps", type=int, default=3)
    ap.add_argument("--modes", default="off,auto,lookup", help="--spec values, comma-separated (off, auto, lookup, self)")
    ap.add_argument("--peer", action="store_true", help="also run llama.cpp's llama-lookup")
    ap.add_argument("--tasks", default="rewrite,document,story")
    ap.add_argument("--raw", action="store_true", help="the task's text as a plain completion prompt, without the chat template")
    args = ap.parse_args()
    modes = args.modes.split(",")
    peer = Path(os.environ.get("STRATA_PEER_DIR", os.path.expanduser("~/.cache/strata/peer"))) / "build-spec" / "bin"
    tmp = Path(os.environ.get("TMPDIR", "/tmp"))
    rows = []
    for task in args.tasks.split(","):
        prompt_file = tmp / f"spec_task_{task}.txt"
        text = (TASKS / f"{task}.txt").read_text().strip()
        prompt_file.write_text(text + "\n\n" if args.raw else CHATML.format(text))
        runs = {m: [] for m in modes}
        peer_runs = []
        plain = None
        for rep in range(args.reps):  # alternated, so that the load hits every mode alike
            for mode in modes:
                r = strata(args.binary, args.model, prompt_file, mode, args)
                if mode == "off":
                    plain = plain or r["tokens"]
                runs[mode].append(r)
            if args.peer:
                peer_runs.append(llama_lookup(peer, args.model, prompt_file, args))
        for mode in modes:
            same = all(r["tokens"] == plain for r in runs[mode]) if plain else None
            tps = statistics.median(r["timings"]["decode_tokens_per_s"] for r in runs[mode])
            tpp = statistics.median(r["timings"]["tokens_per_pass"] for r in runs[mode])
            rows.append((task, "strata " + " ".join(mode_flags(mode)), tps, tpp, same))
            log(f"{task}: {' '.join(mode_flags(mode))}: {tps:.1f} t/s, {tpp:.2f} tokens a pass, identical tokens: {same}")
        if peer_runs:
            tps = statistics.median(p["tps"] for p in peer_runs)
            acc = statistics.median(p["accepted"] for p in peer_runs)
            rows.append((task, "llama-lookup", tps, None, None))
            log(f"{task}: llama-lookup: {tps:.1f} t/s, {acc} drafts accepted")
    print(f"| task | engine | decode t/s (median of {args.reps}) | tokens a pass | x plain | greedy tokens = plain |")
    print("| --- | --- | --- | --- | --- | --- |")
    base = {t: tps for t, e, tps, _, _ in rows if e == "strata --spec off"}
    for task, engine, tps, tpp, same in rows:
        ratio = f"{tps / base[task]:.2f}" if task in base else ""
        print(f"| {task} | {engine} | {tps:.1f} | {'' if tpp is None else f'{tpp:.2f}'} | {ratio} | "
              f"{'' if same is None else ('yes' if same else 'NO')} |")


if __name__ == "__main__":
    main()
