#!/usr/bin/env python3
"""Aggregate generation throughput of `strata batch` at several --max-batch, against llama.cpp
decoding the same prompts in batches of the same size.

    python3 bench/batch_throughput.py [-m MODEL] [-N 64] [--max-tokens 128] [--prompt-words 100]
                                      [--batches 1,8,32] [-t THREADS] [--dram SIZE] [--no-llamacpp] [--json]

N prompts are generated (different words, about --prompt-words words each) and sent as
/v1/completions requests, greedy, --max-tokens tokens each with ignore_eos, so both engines
generate exactly N x max-tokens tokens. Tokens/s = generated tokens / seconds from the first
prompt evaluated to the last token (model loading excluded; prompt evaluation included).

Strata: `strata batch --max-batch B` on a JSONL file of the requests (continuous batching
through the Scheduler); the seconds are those it reports.

llama.cpp: llama-cpp-python's low-level API (llama_decode with a multi-sequence llama_batch),
the method of llama.cpp's examples/batched: waves of B prompts, each prompt evaluated into its
own sequence, then one llama_decode per step for the B next tokens, greedy argmax with the
end-of-generation tokens masked. This is static batching (a wave ends when its sequences
do; with equal lengths that costs nothing). The high-level `Llama` class and llama_cpp.server
are not used: they run one sequence at a time, and the class cannot turn off the AMX
repacking that crashes on Sapphire Rapids (see bench/peer_llamacpp.py).

--dram SIZE (root, cgroup v1) measures a model larger than the memory given: Strata runs with
`--dram SIZE` (the layers that do not fit stream from the file every step, once for the whole
batch), and llama.cpp, which maps the file, runs with this process moved into a memory cgroup
limited to SIZE (the limit counts the page cache, so only SIZE of the mapped weights stay in
memory), the same way bench/offload.py constrains it. The page cache is dropped before each.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import re
import subprocess
import sys
import tempfile
import time

from common import Cgroup, default_model, drop_caches, parse_size, words

HERE = os.path.dirname(os.path.abspath(__file__))


def prompts(n: int, n_words: int) -> list[str]:
    return [f"Note {i}: " + words(i, n_words) for i in range(n)]


def run_strata(args, texts: list[str], batch: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        inp, out = os.path.join(tmp, "in.jsonl"), os.path.join(tmp, "out.jsonl")
        with open(inp, "w") as f:
            for i, t in enumerate(texts):
                f.write(json.dumps({"custom_id": f"p{i}", "method": "POST", "url": "/v1/completions",
                                    "body": {"prompt": t, "max_tokens": args.max_tokens, "temperature": 0,
                                             "ignore_eos": True}}) + "\n")
        cmd = [args.strata, "batch", "-m", args.model, "-i", inp, "-o", out, "--max-batch", str(batch),
               "-t", str(args.threads)] + (["--dram", args.dram] if args.dram else [])
        if args.dram:
            drop_caches()
        print("+ " + " ".join(cmd), file=sys.stderr)
        err = subprocess.run(cmd, check=True, stderr=subprocess.PIPE, text=True).stderr
        m = re.search(r"(\d+) tokens generated, ([\d.]+) tokens/s", err)
        if not m:
            sys.exit(f"batch_throughput: no summary line in strata's stderr:\n{err}")
        tokens = sum(json.loads(l)["response"]["body"]["usage"]["completion_tokens"] for l in open(out))
    return {"engine": "strata", "max_batch": batch, "tokens": tokens, "tokens_per_s": float(m.group(2))}


class LlamaCpp:
    def __init__(self, model: str, threads: int, n_ctx: int, n_seq: int):
        import llama_cpp as L
        import numpy as np
        self.L, self.np = L, np
        if hasattr(L, "llama_log_set"):
            self.log_cb = L.llama_log_callback(lambda level, text, user: None)
            L.llama_log_set(self.log_cb, ctypes.c_void_p())
        L.llama_backend_init()
        mp = L.llama_model_default_params()
        mp.n_gpu_layers = 0
        mp.use_extra_bufts = False  # AMX repacking segfaults on Sapphire Rapids (bench/peer_llamacpp.py)
        self.model = L.llama_model_load_from_file(model.encode(), mp)
        if not self.model:
            sys.exit(f"batch_throughput: llama.cpp could not load {model}")
        self.vocab = L.llama_model_get_vocab(self.model)
        self.n_vocab = L.llama_vocab_n_tokens(self.vocab)
        self.eog = [t for t in range(self.n_vocab) if L.llama_vocab_is_eog(self.vocab, t)]
        cp = L.llama_context_default_params()
        cp.n_ctx = n_ctx
        cp.n_batch = cp.n_ubatch = 512
        cp.n_seq_max = n_seq
        if hasattr(cp, "kv_unified"):
            cp.kv_unified = True
        cp.n_threads = cp.n_threads_batch = threads
        cp.no_perf = True
        self.ctx = L.llama_init_from_model(self.model, cp)
        if not self.ctx:
            sys.exit("batch_throughput: llama.cpp could not create a context")
        self.mem = L.llama_get_memory(self.ctx)
        self.batch = L.llama_batch_init(max(512, n_seq), 0, 1)

    def tokenize(self, text: str) -> list[int]:
        raw = text.encode()
        arr = (self.L.llama_token * (len(raw) + 8))()
        n = self.L.llama_tokenize(self.vocab, raw, len(raw), arr, len(arr), True, True)
        return list(arr[:n])

    def decode(self, items: list[tuple[int, int, int, bool]]) -> None:
        """items: (token, position, sequence, wants logits)."""
        b = self.batch
        for i, (tok, pos, seq, logits) in enumerate(items):
            b.token[i], b.pos[i], b.n_seq_id[i], b.logits[i] = tok, pos, 1, logits
            b.seq_id[i][0] = seq
        b.n_tokens = len(items)
        if self.L.llama_decode(self.ctx, b) != 0:
            sys.exit("batch_throughput: llama_decode failed")

    def argmax(self, i: int) -> int:
        row = self.np.ctypeslib.as_array(self.L.llama_get_logits_ith(self.ctx, i), shape=(self.n_vocab,)).copy()
        row[self.eog] = -self.np.inf  # as ignore_eos
        return int(row.argmax())

    def run(self, texts: list[str], wave: int, max_tokens: int) -> int:
        generated = 0
        for w in range(0, len(texts), wave):
            self.L.llama_memory_clear(self.mem, True)
            group = [self.tokenize(t) for t in texts[w:w + wave]]
            nxt, pos = [], []
            for s, toks in enumerate(group):  # each prompt into its own sequence
                for c in range(0, len(toks), 512):
                    chunk = toks[c:c + 512]
                    self.decode([(t, c + k, s, c + k == len(toks) - 1) for k, t in enumerate(chunk)])
                nxt.append(self.argmax(len(toks) - 1 - (len(toks) - 1) // 512 * 512))
                pos.append(len(toks))
            generated += len(group)
            for _ in range(max_tokens - 1):  # one step: the next token of every sequence together
                self.decode([(nxt[s], pos[s], s, True) for s in range(len(group))])
                for s in range(len(group)):
                    nxt[s] = self.argmax(s)
                    pos[s] += 1
                generated += len(group)
        return generated


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model", default=default_model())
    ap.add_argument("--strata", default=os.path.join(HERE, "..", "build", "strata"))
    ap.add_argument("-N", "--prompts", type=int, default=64)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--prompt-words", type=int, default=100)
    ap.add_argument("--batches", default="1,8,32")
    ap.add_argument("-t", "--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--dram", help="memory for each engine (Strata's --dram; llama.cpp in a memory cgroup)")
    ap.add_argument("--no-llamacpp", action="store_true", help="measure Strata only")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if not os.path.exists(args.model):
        sys.exit(f"batch_throughput: no such model file: {args.model}")
    texts = prompts(args.prompts, args.prompt_words)
    batches = [int(b) for b in args.batches.split(",")]

    rows = [run_strata(args, texts, b) for b in batches]
    if not args.no_llamacpp:
        try:
            import llama_cpp  # noqa: F401
        except ImportError:
            sys.exit("batch_throughput: llama-cpp-python is not installed (pip install llama-cpp-python), or pass --no-llamacpp")
        longest = max(len(t.split()) for t in texts) * 4 + args.max_tokens + 16  # generous per-sequence room
        cgroup = None
        if args.dram:
            cgroup = Cgroup(parse_size(args.dram))
            drop_caches()
            (cgroup.path / "cgroup.procs").write_text(f"{os.getpid()}\n")  # this process, so llama.cpp's mmap
        peer = LlamaCpp(args.model, args.threads, n_ctx=max(batches) * longest, n_seq=max(batches))
        peer.run(texts[:1], 1, 4)  # warm-up
        for b in batches:
            t0 = time.perf_counter()
            n = peer.run(texts, b, args.max_tokens)
            rows.append({"engine": "llama.cpp", "max_batch": b, "tokens": n, "tokens_per_s": n / (time.perf_counter() - t0)})
        if cgroup:
            (Cgroup.ROOT / "cgroup.procs").write_text(f"{os.getpid()}\n")
            cgroup.remove()

    if args.json:
        for r in rows:
            print(json.dumps(r))
        return
    by = {(r["engine"], r["max_batch"]): r for r in rows}
    print(f"{args.prompts} prompts x {args.max_tokens} tokens, {args.threads} threads, {os.path.basename(args.model)}"
          + (f", memory {args.dram} each" if args.dram else ""))
    print("| batch | Strata tokens/s | llama.cpp tokens/s | Strata / llama.cpp |")
    print("| ---: | ---: | ---: | ---: |")
    for b in batches:
        s, p = by[("strata", b)], by.get(("llama.cpp", b))
        ratio = f"{s['tokens_per_s'] / p['tokens_per_s']:.2f}x" if p else "-"
        print(f"| {b} | {s['tokens_per_s']:.1f} | {p['tokens_per_s']:.1f} | {ratio} |" if p else
              f"| {b} | {s['tokens_per_s']:.1f} | - | - |")


if __name__ == "__main__":
    main()
