#!/usr/bin/env python3
"""The numpy reference forward pass (tests/reference/reference_forward.py) against llama.cpp's
`llama-perplexity` on synthetic models of the architectures it was last extended to (deepseek2,
gpt-oss): the same tokens, chunks and scored positions, perplexity within 0.5%. That is what
shows the reference right before the engine is compared with it.

    python3 bench/reference_perplexity.py [--shapes deepseek2-tiny,deepseek2-lite-tiny,gpt-oss-tiny] [--type F32]
                                          [--expert-type MXFP4] [--std 0.1] [--chunks 4]
                                          [--workdir /tmp/strata-arch] [-t THREADS] [--max-diff 0.5]

llama-perplexity runs with an F32 KV cache and flash attention off (its CPU kernel rounds to F16
inside: 0.1% on gpt-oss-tiny) at context 512 over /usr/share/common-licenses/GPL-3 and writes
its tokens (--kl-divergence-base); the reference runs each chunk in float64 from the
first position (the chunk's first token replaced by BOS where the tokenizer adds one, as
llama-perplexity does) and scores positions 256..510 of each. Prints a table and exits 1 when a
difference is over --max-diff percent. Needs llama-perplexity (bench/build_llamacpp.sh).
"""
from __future__ import annotations

import argparse
import math
import os
import re
import subprocess
import sys

import numpy as np

from common import cache_dir, log

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "reference"))
from reference_forward import RefModel, log_softmax  # noqa: E402

TEXT = "/usr/share/common-licenses/GPL-3"
N_CTX = 512


def run(cmd: list[str]) -> str:
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-3000:]}")
    return r.stdout + r.stderr


def peer_tokens(path: str) -> np.ndarray:
    """The tokens llama-perplexity scored, from its --kl-divergence-base file: "_logits_", n_ctx,
    n_vocab, n_chunk (int32 each), then n_chunk * n_ctx token ids."""
    with open(path, "rb") as f:
        if f.read(8) != b"_logits_":
            sys.exit(f"{path} is not a llama-perplexity logits file")
        n_ctx, _, n_chunk = np.frombuffer(f.read(12), dtype="<i4")
        return np.frombuffer(f.read(4 * n_ctx * n_chunk), dtype="<i4").reshape(n_chunk, n_ctx)


def reference_ppl(model: RefModel, chunks: np.ndarray) -> float:
    first, nll, count = N_CTX // 2, 0.0, 0
    for i, chunk in enumerate(chunks):
        ids = chunk.astype(np.int64).copy()
        if model.add_bos:
            ids[0] = model.bos_id
        lp = log_softmax(model.forward(ids))
        nll -= float(sum(lp[j, ids[j + 1]] for j in range(first, N_CTX - 1)))
        count += N_CTX - 1 - first
        log(f"  chunk {i + 1}/{len(chunks)}: running PPL {math.exp(nll / count):.4f}")
    return math.exp(nll / count)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="deepseek2-tiny,deepseek2-lite-tiny,gpt-oss-tiny")
    ap.add_argument("--type", default="F32")
    ap.add_argument("--expert-type", default="", help="the routed experts' type (default: --type)")
    ap.add_argument("--std", type=float, default=0.1)
    ap.add_argument("--chunks", type=int, default=4)
    ap.add_argument("--workdir", default="/tmp/strata-arch")
    ap.add_argument("-t", "--threads", type=int, default=os.cpu_count())
    ap.add_argument("--max-diff", type=float, default=0.5, help="largest difference allowed, in percent")
    ap.add_argument("--llama-perplexity", default=cache_dir("peer", "build", "bin", "llama-perplexity"))
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    experts = a.expert_type or a.type
    rows, worst = [], 0.0
    for shape in a.shapes.split(","):
        path = os.path.join(a.workdir, f"{shape}-{a.type}-{experts}-std{a.std}.gguf")
        if not os.path.exists(path):
            run([sys.executable, os.path.join(HERE, "make_synthetic_gguf.py"), "--shape", shape, "--type", a.type,
                 "--expert-type", experts, "--std", str(a.std), "-o", path])
        log(f"{shape}: llama-perplexity")
        kld = path + ".tokens"
        out = run([a.llama_perplexity, "-m", path, "-f", TEXT, "-c", str(N_CTX), "--chunks", str(a.chunks),
                   "-t", str(a.threads), "-ctk", "f32", "-ctv", "f32", "-fa", "off", "--kl-divergence-base", kld])
        peer = float(re.search(r"Final estimate: PPL = ([\d.]+)", out).group(1))
        log(f"{shape}: numpy reference")
        ours = reference_ppl(RefModel(path), peer_tokens(kld))
        diff = 100 * abs(ours - peer) / peer
        worst = max(worst, diff)
        rows.append((shape, a.type, experts, peer, ours, diff))
    print("| shape | type | experts | llama-perplexity | numpy reference | difference |")
    print("|---|---|---|---:|---:|---:|")
    for shape, t, e, p, s, d in rows:
        print(f"| {shape} | {t} | {e} | {p:.4f} | {s:.4f} | {d:.4f}% |")
    if worst > a.max_diff:
        sys.exit(f"difference {worst:.4f}% is over {a.max_diff}%")


if __name__ == "__main__":
    main()
