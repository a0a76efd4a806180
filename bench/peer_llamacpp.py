#!/usr/bin/env python3
"""llama.cpp on the same GGUF, threads and tests as `strata bench`, through llama-cpp-python.

    python3 bench/peer_llamacpp.py -m MODEL [-p 512] [-n 128] [-t THREADS] [-r REPS] [--json]

The tests follow llama-bench (tools/llama-bench in llama.cpp):
  pp<P>  evaluate P random tokens from an empty KV cache, in one batch (n_batch = n_ubatch = 512),
         only the last token's logits requested; t/s = P / seconds.
  tg<N>  from an empty KV cache, N single-token evaluations, each feeding a random token;
         t/s = N / seconds.
One untimed warm-up of each test runs first; the table shows mean ± sample stddev over REPS.

The low-level C API (llama_cpp.llama_*) is used, not the `Llama` class, because the class does
not expose `use_extra_bufts`.  It is set to False: on Sapphire Rapids (AMX) the llama.cpp build
of llama-cpp-python 0.3.36 segfaults in its AMX repacking path (ggml_backend_amx_mul_mat).
That flag also turns off ggml's CPU_REPACK buffer (the Q4_0 8x8 interleaved layout), so this
measures llama.cpp's standard CPU path (vec_dot + llamafile sgemm), as llama-bench would with
`--no-repack` / without extra buffer types.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import random
import statistics
import sys
import time


def die(msg: str) -> None:
    print(f"peer_llamacpp: {msg}", file=sys.stderr)
    sys.exit(1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("-p", "--n-prompt", type=int, default=512)
    ap.add_argument("-n", "--n-gen", type=int, default=128)
    ap.add_argument("-t", "--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("-r", "--reps", type=int, default=5)
    ap.add_argument("--json", action="store_true", help="one JSON object per test on stdout")
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()
    if not os.path.exists(args.model):
        die(f"no such model file: {args.model}")
    if args.reps < 1 or args.threads < 1 or args.n_prompt < 0 or args.n_gen < 0:
        die("reps and threads must be >= 1, -p/-n >= 0")

    try:
        import llama_cpp as L
    except ImportError:
        die("llama-cpp-python is not installed (pip install llama-cpp-python)")

    # ggml logs to stderr through llama.cpp's default logger; keep it quiet.
    if hasattr(L, "llama_log_set"):
        cb = L.llama_log_callback(lambda level, text, user: None)
        L.llama_log_set(cb, ctypes.c_void_p())
        main.log_cb = cb  # keep the callback alive
    L.llama_backend_init()

    mp = L.llama_model_default_params()
    mp.n_gpu_layers = 0
    mp.use_extra_bufts = False  # AMX repacking segfaults on this CPU (see the docstring)
    model = L.llama_model_load_from_file(args.model.encode(), mp)
    if not model:
        die(f"llama.cpp could not load {args.model}")
    vocab = L.llama_model_get_vocab(model)
    n_vocab = L.llama_vocab_n_tokens(vocab)

    cp = L.llama_context_default_params()
    cp.n_ctx = max(16, args.n_prompt + args.n_gen)
    cp.n_batch = max(1, min(512, args.n_prompt or 1))
    cp.n_ubatch = cp.n_batch
    cp.n_threads = args.threads
    cp.n_threads_batch = args.threads
    cp.no_perf = True
    ctx = L.llama_init_from_model(model, cp)
    if not ctx:
        die("llama.cpp could not create a context")
    mem = L.llama_get_memory(ctx)
    rng = random.Random(args.seed)

    def decode(tokens: list[int]) -> None:
        arr = (L.llama_token * len(tokens))(*tokens)
        batch = L.llama_batch_get_one(arr, len(tokens))
        rc = L.llama_decode(ctx, batch)
        if rc != 0:
            die(f"llama_decode returned {rc}")

    def run_pp(n: int) -> float:
        L.llama_memory_clear(mem, True)
        toks = [rng.randrange(n_vocab) for _ in range(n)]
        t0 = time.perf_counter()
        for i in range(0, n, cp.n_batch):
            decode(toks[i : i + cp.n_batch])
        L.llama_synchronize(ctx)
        return time.perf_counter() - t0

    def run_tg(n: int) -> float:
        L.llama_memory_clear(mem, True)
        t0 = time.perf_counter()
        tok = rng.randrange(n_vocab)
        for _ in range(n):
            decode([tok])
            L.llama_synchronize(ctx)
            tok = rng.randrange(n_vocab)
        return time.perf_counter() - t0

    desc = ctypes.create_string_buffer(256)
    L.llama_model_desc(model, desc, len(desc))
    size = L.llama_model_size(model)
    n_params = L.llama_model_n_params(model)

    tests = []
    if args.n_prompt > 0:
        tests.append((f"pp{args.n_prompt}", args.n_prompt, run_pp))
    if args.n_gen > 0:
        tests.append((f"tg{args.n_gen}", args.n_gen, run_tg))

    rows = []
    for name, n, fn in tests:
        fn(min(n, 32) if name.startswith("tg") else n)  # warm-up
        ts = [n / fn(n) for _ in range(args.reps)]
        rows.append(
            {
                "engine": "llama.cpp",
                "version": getattr(L, "__version__", "?"),
                "model": os.path.basename(args.model),
                "model_type": desc.value.decode(errors="replace"),
                "size_bytes": size,
                "n_params": n_params,
                "backend": "CPU",
                "threads": args.threads,
                "test": name,
                "n_tokens": n,
                "reps": args.reps,
                "avg_ts": statistics.mean(ts),
                "stddev_ts": statistics.stdev(ts) if len(ts) > 1 else 0.0,
                "samples_ts": ts,
                "cpu": platform.processor() or platform.machine(),
            }
        )
    L.llama_free(ctx)
    L.llama_model_free(model)

    if args.json:
        for r in rows:
            print(json.dumps(r))
        return
    hdr = f"| {'model':<30} | {'size':>10} | {'params':>8} | {'backend':<9} | {'threads':>7} | {'test':>6} | {'t/s':>20} |"
    print(hdr)
    print("|" + "|".join("-" * (len(c)) for c in hdr.split("|")[1:-1]) + "|")
    for r in rows:
        print(
            f"| {r['model_type'][:30]:<30} | {r['size_bytes'] / 2**20:>6.2f} MiB | {r['n_params'] / 1e6:>7.2f}M | "
            f"{'llama.cpp':<9} | {r['threads']:>7} | {r['test']:>6} | {r['avg_ts']:>10.2f} ± {r['stddev_ts']:>7.2f} |"
        )


if __name__ == "__main__":
    main()
