#!/usr/bin/env python3
"""Strata's perplexity against llama.cpp's `llama-perplexity` on synthetic models of each
architecture (bench/make_synthetic_gguf.py), as the issue on architectures asks: within 0.5%
on F32 files, context 512, GPL-3 as the text.

    python3 bench/arch_perplexity.py [--shapes qwen3-tiny,gemma3-tiny,...] [--type F32] [--expert-type MXFP4]
                                     [--std 0.1] [--workdir /tmp/strata-arch] [-t THREADS] [--max-diff 0.5]

Both run with an F32 KV cache (`--kv-type f32`, `-ctk f32 -ctv f32`) on the same threads;
llama-perplexity without flash attention (`-fa off`: its flash-attention path rounds K and V
to F16, and it has no MLA flash attention).
Random weights of std 0.02 (the benchmark default) predict almost uniformly, so the perplexity
would be about the vocabulary size whatever the forward pass did; --std (default 0.1) makes
the predictions depend on every layer. Prints a table and exits 1 when a difference is over
--max-diff percent. Needs llama-perplexity (bench/build_llamacpp.sh) and the built strata.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys

from common import cache_dir, log

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SHAPES = "qwen3-tiny,qwen3moe-tiny,mixtral-tiny,gemma2-tiny,gemma3-tiny,phi3-tiny,deepseek2-tiny,deepseek2-lite-tiny,gpt-oss-tiny"
TEXT = "/usr/share/common-licenses/GPL-3"


def run(cmd: list[str]) -> str:
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-2000:]}")
    return r.stdout + r.stderr


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default=SHAPES)
    ap.add_argument("--type", default="F32")
    ap.add_argument("--expert-type", help="the routed experts' type (default: --type)")
    ap.add_argument("--std", type=float, default=0.1)
    ap.add_argument("--workdir", default="/tmp/strata-arch")
    ap.add_argument("-t", "--threads", type=int, default=os.cpu_count())
    ap.add_argument("--max-diff", type=float, default=0.5, help="largest difference allowed, in percent")
    ap.add_argument("--strata", default=os.path.join(REPO, "build", "strata"))
    ap.add_argument("--llama-perplexity", default=cache_dir("peer", "build", "bin", "llama-perplexity"))
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    rows, worst = [], 0.0
    for shape in a.shapes.split(","):
        experts = a.expert_type or a.type
        path = os.path.join(a.workdir, f"{shape}-{a.type}-{experts}-std{a.std}.gguf")
        if not os.path.exists(path):
            run([sys.executable, os.path.join(HERE, "make_synthetic_gguf.py"), "--shape", shape, "--type", a.type,
                 "--expert-type", experts, "--std", str(a.std), "-o", path])
        log(f"{shape}: llama-perplexity")
        peer = run([a.llama_perplexity, "-m", path, "-f", TEXT, "-c", "512", "-t", str(a.threads), "-ctk", "f32",
                    "-ctv", "f32", "-fa", "off"])
        log(f"{shape}: strata perplexity")
        ours = run([a.strata, "perplexity", "-m", path, "-f", TEXT, "--chunk", "512", "-t", str(a.threads),
                    "--kv-type", "f32"])
        p = float(re.search(r"Final estimate: PPL = ([\d.]+)", peer).group(1))
        s = float(re.search(r"^PPL = ([\d.]+)", ours, re.M).group(1))
        diff = 100 * abs(s - p) / p
        worst = max(worst, diff)
        rows.append((shape, a.type if experts == a.type else f"{a.type}, experts {experts}", p, s, diff))
    print(f"| shape | type | llama-perplexity | strata perplexity | difference |")
    print(f"|---|---|---:|---:|---:|")
    for shape, t, p, s, d in rows:
        print(f"| {shape} | {t} | {p:.4f} | {s:.4f} | {d:.4f}% |")
    if worst > a.max_diff:
        sys.exit(f"difference {worst:.4f}% is over {a.max_diff}%")


if __name__ == "__main__":
    main()
