#!/usr/bin/env python3
"""Write a GGUF with random weights and a real tokenizer, for benchmarks and checks against llama.cpp.

    python3 bench/make_synthetic_gguf.py --shape NAME --type TYPE -o FILE [--seed S] [--std X]
                                         [--expert-type TYPE] [--n-layer N] [--tied | --untied]
                                         [--tokenizer-from GGUF] [--header-only] [--list]

  --shape   llama: tiny | smollm2-135m | tinyllama-1.1b | llama2-7b | llama3-8b | llama3-70b;
            other architectures at test size: qwen3-tiny | qwen3moe-tiny | mixtral-tiny | gemma2-tiny |
            gemma3-tiny | phi3-tiny | deepseek2-tiny | deepseek2-lite-tiny | gpt-oss-tiny; real mixture-of-experts
            dimensions: qwen3-30b-a3b | mixtral-8x7b | deepseek-v2-lite | deepseek-v3 | gpt-oss-20b |
            gpt-oss-120b (bench/synthetic_shapes.py; --list shows them)
  --type    F32 | F16 | Q8_0 | Q4_0 | Q4_K | Q2_K | Q3_K | Q6_K | IQ4_NL | IQ4_XS | MXFP4   for every 2-D
            weight, token_embd and output included; norms are F32 (all ones), and deepseek2's and
            gpt-oss's routers, biases and sinks F32 (random).  The 256-value types need
            rows (ne0) that are multiples of 256; where a tensor's rows are not (smollm2-135m:
            n_embd 576), that tensor falls back as llama.cpp's quantizer does: Q4_K to Q5_0,
            Q2_K and Q3_K to Q4_0, IQ4_XS to IQ4_NL.
  --expert-type  the routed experts' type (default: --type); gpt-oss ships its experts in MXFP4.
  --header-only  write the header and tensor table and extend the file to its full size without
            writing the weights (a sparse file whose data reads as zeros): `strata plan FILE` dry
            runs of the real shapes (deepseek-v3: 400 GB at Q4_K) on a small disk. Such a file
            keeps the shape's own vocabulary size and does not load in llama.cpp.
  --n-layer override the shape's layer count (e.g. a 2-layer llama3-70b slice for quick tests)
  --seed    RNG seed (default 0); the same arguments give a byte-identical file.
  --std     the weights' standard deviation (default 0.02). Larger weights (0.1-0.3) make
            predictions far from uniform, so a perplexity compared with llama.cpp's depends on
            every part of the forward pass (BENCHMARKS.md, section Architectures).

Examples:
    python3 bench/make_synthetic_gguf.py --shape tiny --type Q4_K -o /tmp/tiny-q4k.gguf
    python3 bench/make_synthetic_gguf.py --shape llama3-70b --type Q4_0 -o /nvme/l70.gguf
    python3 bench/make_synthetic_gguf.py --shape qwen3-30b-a3b --type Q4_K -o /tmp/qwen3-30b-a3b-q4k.gguf

The tokenizer (gpt2 BPE, vocab 49152, ChatML template) is copied from the SmolLM2-135M GGUF's
tokenizer.* keys (--tokenizer-from; default: the default model in the model cache, where
scripts/fetch_model.sh puts it), so every shape has n_vocab = 49152 whatever the real model's
vocabulary is (llama3's 128256-token embedding is smaller here: about 0.6 GB less at 8B F16).

Weights are not quantized from floats: random *valid* blocks are written directly, scaled so
every weight has mean about 0 and standard deviation about 0.02 (activations stay sane through
many layers).  To be fast, each type draws a 32 MiB pool of random blocks (or F16/F32 values)
once from the seed, and each write takes a slice of it at a random block offset; tensors below
32 MiB are effectively fully random, bigger ones repeat the pool.  Data is streamed to disk in
chunks (memory use is the pool plus one chunk), progress goes to stderr, and free disk space is
checked before anything is written.  The file loads in gguf.GGUFReader and llama.cpp.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import time

import numpy as np
from gguf import GGML_QUANT_SIZES, GGUFReader, GGUFValueType, GGUFWriter, LlamaFileType
from gguf import GGMLQuantizationType as QT

from common import default_model
from synthetic_shapes import SHAPES, Shape, TensorSpec, moe_tensor_specs, tensor_specs, type_for_rows, write_metadata

DEFAULT_TOKENIZER = default_model()
STD = 0.02
POOL_BYTES = 32 << 20
CHUNK_BYTES = 64 << 20


TYPES = {"F32": QT.F32, "F16": QT.F16, "Q8_0": QT.Q8_0, "Q4_0": QT.Q4_0, "Q4_K": QT.Q4_K, "Q2_K": QT.Q2_K,
         "Q3_K": QT.Q3_K, "Q6_K": QT.Q6_K, "IQ4_NL": QT.IQ4_NL, "IQ4_XS": QT.IQ4_XS, "MXFP4": QT.MXFP4}
FILE_TYPE = {"F32": LlamaFileType.ALL_F32, "F16": LlamaFileType.MOSTLY_F16, "Q8_0": LlamaFileType.MOSTLY_Q8_0,
             "Q4_0": LlamaFileType.MOSTLY_Q4_0, "Q4_K": LlamaFileType.MOSTLY_Q4_K_S,
             "Q2_K": LlamaFileType.MOSTLY_Q2_K, "Q3_K": LlamaFileType.MOSTLY_Q3_K_S, "Q6_K": LlamaFileType.MOSTLY_Q6_K,
             "IQ4_NL": LlamaFileType.MOSTLY_IQ4_NL, "IQ4_XS": LlamaFileType.MOSTLY_IQ4_XS,
             "MXFP4": LlamaFileType.MOSTLY_MXFP4_MOE}
# IQ4_NL / IQ4_XS: q indexes this codebook (ggml's kvalues_iq4nl)
IQ4_VALUES = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], dtype=np.float64)
# MXFP4: q indexes the e2m1 values doubled (ggml's kvalues_mxfp4); the scale is 2^(e - 128)
MXFP4_VALUES = np.array([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12], dtype=np.float64)


# ---------------------------------------------------------------------------------------------
# random valid blocks
# ---------------------------------------------------------------------------------------------
def _f16(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float16).reshape(-1, 1).view(np.uint8)


def make_pool(qtype: QT, rng: np.random.Generator, std: float = STD) -> np.ndarray:
    """POOL_BYTES worth of random valid blocks of qtype as a flat uint8 array (whole blocks)."""
    bs, ts = GGML_QUANT_SIZES[qtype]
    n = POOL_BYTES // ts
    if qtype in (QT.F32, QT.F16):
        vals = rng.standard_normal(n, dtype=np.float32) * std
        return vals.astype(np.float32 if qtype == QT.F32 else np.float16).view(np.uint8)
    # per-block scale jitter so blocks are not all alike: d * U(0.75, 1.25)
    jitter = rng.uniform(0.75, 1.25, n).astype(np.float32)
    payload = rng.integers(0, 256, size=(n, ts), dtype=np.uint8)  # every quant pattern is valid
    # Symmetric formats (w = d*(q - offset)) get q drawn from 1..2*offset-1, so the mean is 0.
    if qtype == QT.Q8_0:        # d f16, qs int8[32]: w = d*q, q in -127..127 (std ~73.3)
        payload[:, 0:2] = _f16(std / 73.3 * jitter)
        payload[:, 2:][payload[:, 2:] == 0x80] = 0  # -128 -> 0 keeps the distribution symmetric
    elif qtype == QT.Q4_0:      # d f16, qs u8[16]: w = d*(q-8), q in 1..15 (std 4.32)
        payload[:, 0:2] = _f16(std / 4.32 * jitter)
        q = rng.integers(1, 16, size=(n, 2, 16), dtype=np.uint8)  # [j] low nibble, [j+16] high
        payload[:, 2:] = q[:, 0] | (q[:, 1] << 4)
    elif qtype == QT.Q5_0:      # d f16, qh u8[4], qs u8[16]: w = d*(q-16), q in 1..31 (std 8.94)
        payload[:, 0:2] = _f16(std / 8.94 * jitter)
        q = rng.integers(1, 32, size=(n, 32), dtype=np.uint8)
        payload[:, 6:] = (q[:, :16] & 15) | ((q[:, 16:] & 15) << 4)
        qh = ((q >> 4).astype(np.uint32) << np.arange(32, dtype=np.uint32)).sum(axis=1, dtype=np.uint32)
        payload[:, 2:6] = qh.astype("<u4").view(np.uint8).reshape(n, 4)
    elif qtype == QT.Q4_K:
        # d f16, dmin f16, scales u8[12], qs u8[128]: w = d*sc*q - dmin*m per 32-value sub-block.
        # All 8 sub-blocks use sc = 8, m = 15 (6-bit packed; both < 16 so the high bits are 0):
        #   scales[0:4] = sc, scales[4:8] = m, scales[8:12] = (sc & 15) | (m & 15) << 4.
        # q uniform 0..15 (mean 7.5, std 4.61): mean 0 needs dmin*15 = d*8*7.5 -> dmin = 4d.
        d = std / (8 * 4.61) * jitter
        payload[:, 0:2] = _f16(d)
        payload[:, 2:4] = _f16(4 * d)
        payload[:, 4:8] = 8
        payload[:, 8:12] = 15
        payload[:, 12:16] = 8 | (15 << 4)
    elif qtype == QT.Q2_K:
        # scales u8[16], qs u8[64], d f16, dmin f16: w = d*sc*q - dmin*m per group of 16 values.
        # Every group sc = 8, m = 12 (scales byte 8 | 12 << 4); q uniform 0..3 (mean 1.5, std
        # 1.118): mean 0 needs dmin*12 = d*8*1.5 -> dmin = d.
        d = std / (8 * 1.118) * jitter
        payload[:, 0:16] = 8 | (12 << 4)
        payload[:, 80:82] = _f16(d)
        payload[:, 82:84] = _f16(d)
    elif qtype == QT.Q3_K:
        # hmask u8[32], qs u8[64], scales u8[12], d f16: w = d*(sc-32)*(q-4) per group of 16, q
        # uniform 0..7 (rms of q-4: 2.345). Every sc - 32 = 8 (6 bits 40: low nibbles 8 in bytes
        # 0-7, high bits 2 in each 2-bit field of bytes 8-11); d of random sign makes the mean 0.
        d = std / (8 * 2.345) * jitter * rng.choice([-1.0, 1.0], n)
        payload[:, 96:104] = 8 | (8 << 4)
        payload[:, 104:108] = 0b10101010
        payload[:, 108:110] = _f16(d)
    elif qtype == QT.Q6_K:
        # ql u8[128], qh u8[64], scales i8[16], d f16: w = d*sc*(q-32) per group of 16, q uniform
        # 0..63 (rms of q-32: 18.47). Every sc = 8; d of random sign makes the mean 0.
        d = std / (8 * 18.47) * jitter * rng.choice([-1.0, 1.0], n)
        payload[:, 192:208] = 8
        payload[:, 208:210] = _f16(d)
    elif qtype == QT.IQ4_NL:
        # d f16, qs u8[16]: w = d*IQ4_VALUES[q], q uniform 0..15; d of random sign: mean 0.
        d = std / np.sqrt(np.mean(IQ4_VALUES ** 2)) * jitter * rng.choice([-1.0, 1.0], n)
        payload[:, 0:2] = _f16(d)
    elif qtype == QT.IQ4_XS:
        # d f16, scales_h u16, scales_l u8[4], qs u8[128]: w = d*(ls-32)*IQ4_VALUES[q] per 32
        # values. Every ls - 32 = 8 (ls 40: low nibbles 8, high bit pairs 2); d of random sign.
        d = std / (8 * np.sqrt(np.mean(IQ4_VALUES ** 2))) * jitter * rng.choice([-1.0, 1.0], n)
        payload[:, 0:2] = _f16(d)
        payload[:, 2:4] = 0b10101010
        payload[:, 4:8] = 8 | (8 << 4)
    elif qtype == QT.MXFP4:
        # e u8, qs u8[16]: w = 2^(e-128) * MXFP4_VALUES[q], q uniform (mean 0); the scale a power of
        # two, so the jitter is the exponent's: one step either way.
        e = np.round(128 + np.log2(std / np.sqrt(np.mean(MXFP4_VALUES ** 2)))) + rng.integers(-1, 2, n)
        payload[:, 0] = np.clip(e, 2, 254).astype(np.uint8)
    else:
        raise ValueError(f"no random block generator for {qtype.name}")
    return payload.reshape(-1)


# ---------------------------------------------------------------------------------------------
# model layout: bench/synthetic_shapes.py
# ---------------------------------------------------------------------------------------------

def copy_tokenizer(w: GGUFWriter, src: str) -> int:
    if not os.path.exists(src):
        fetch = "run scripts/fetch_model.sh, or " if src == DEFAULT_TOKENIZER else ""
        raise SystemExit(f"tokenizer source {src} not found: {fetch}pass --tokenizer-from a GGUF with a "
                         "gpt2 tokenizer (SmolLM2-135M-Instruct)")
    r = GGUFReader(src)
    n_vocab = 0
    for k, f in r.fields.items():
        if not k.startswith("tokenizer."):
            continue
        vt = f.types[0]
        w.add_key_value(k, f.contents(), vt, sub_type=f.types[-1] if vt == GGUFValueType.ARRAY else None)
        if k == "tokenizer.ggml.tokens":
            n_vocab = len(f.data)
    if not n_vocab:
        raise SystemExit(f"{src} has no tokenizer.ggml.tokens")
    return n_vocab


# ---------------------------------------------------------------------------------------------
# writing
# ---------------------------------------------------------------------------------------------
class Progress:
    def __init__(self, total: int):
        self.total, self.done, self.t0, self.last = total, 0, time.time(), 0.0
        self.tty = sys.stderr.isatty()
        self.last_pct = -1
        self.printed_done = False

    def add(self, n: int, final: bool = False):
        self.done += n
        now = time.time()
        pct = int(100 * self.done / max(self.total, 1))
        if final and self.printed_done:
            if self.tty:
                print(file=sys.stderr)
            return
        if not final and (now - self.last < (0.5 if self.tty else 10.0)) and pct // 10 == self.last_pct // 10:
            return
        self.last, self.last_pct = now, pct
        self.printed_done = self.done >= self.total
        el = now - self.t0
        rate = self.done / el if el > 0 else 0.0
        eta = (self.total - self.done) / rate if rate > 0 else 0.0
        msg = (f"  {self.done / 2**30:8.2f} / {self.total / 2**30:.2f} GiB  {pct:3d}%  "
               f"{rate / 2**20:7.1f} MiB/s  ETA {eta:5.0f}s")
        print(("\r" + msg) if self.tty else msg, end="\n" if (final or not self.tty) else "",
              file=sys.stderr, flush=True)


def write_model(args) -> None:
    sh = SHAPES[args.shape]
    if args.n_layer:
        sh = Shape(**{**sh.__dict__, "n_layer": args.n_layer})
    tied = sh.tied if args.tied is None else args.tied
    qtype = TYPES[args.type]
    expert_qtype = TYPES[args.expert_type or args.type]
    out = os.path.abspath(args.output)
    if (not sh.head_dim and sh.n_embd % sh.n_head) or sh.n_head % sh.n_head_kv:
        raise SystemExit(f"bad shape {sh}")
    if sh.n_vocab and not args.header_only:
        raise SystemExit(f"{args.shape} keeps its own vocabulary ({sh.n_vocab}): write it with --header-only")

    w = GGUFWriter(out, sh.arch)
    # llama.cpp gives tokens of models named "phi3" Phi-3's attributes, which this tokenizer lacks.
    w.add_name(f"synthetic {args.shape} {args.type}".replace("phi3", "Phi 3"))
    w.add_description(f"Strata synthetic benchmark model: random weights (std {args.std}), shape {args.shape} "
                      f"({sh.note}), seed {args.seed}; tokenizer from SmolLM2-135M. Not a trained model.")
    w.add_file_type(int(FILE_TYPE[args.type]))
    w.add_quantization_version(2)
    write_metadata(w, sh)
    n_vocab = copy_tokenizer(w, args.tokenizer_from)
    n_vocab = sh.n_vocab or n_vocab
    w.add_uint32(f"{sh.arch}.vocab_size", n_vocab)

    if sh.arch in ("deepseek2", "gpt-oss"):
        specs = moe_tensor_specs(sh, n_vocab, lambda ne0: type_for_rows(qtype, ne0),
                                 lambda ne0: type_for_rows(expert_qtype, ne0), tied)
    else:
        specs = tensor_specs(sh, n_vocab, qtype, tied)
    for s in specs:
        bs, ts = GGML_QUANT_SIZES[s.qtype]
        shape_np = tuple(reversed(s.ne))  # numpy order
        if s.qtype == QT.F32:
            w.add_tensor_info(s.name, shape_np, np.dtype(np.float32), s.nbytes)
        elif s.qtype == QT.F16:
            w.add_tensor_info(s.name, shape_np, np.dtype(np.float16), s.nbytes)
        else:
            byte_shape = shape_np[:-1] + (shape_np[-1] // bs * ts,)
            w.add_tensor_info(s.name, byte_shape, np.dtype(np.uint8), s.nbytes, raw_dtype=s.qtype)

    align = w.data_alignment
    data_bytes = sum(GGUFWriter.ggml_pad(s.nbytes, align) for s in specs)
    n_params = sum(int(np.prod(s.ne)) for s in specs)
    need = (0 if args.header_only else data_bytes) + (16 << 20)  # + header / metadata allowance
    d = os.path.dirname(out) or "."
    if not os.path.isdir(d):
        raise SystemExit(f"output directory {d} does not exist")
    free = shutil.disk_usage(d).free + (os.path.getsize(out) if os.path.isfile(out) else 0)
    if free < need:
        raise SystemExit(f"not enough disk space in {d}: need {need / 2**30:.2f} GiB, "
                         f"{free / 2**30:.2f} GiB free")
    types = sorted({s.qtype.name for s in specs})
    experts = f", {sh.n_expert} experts ({sh.n_expert_used} used)" if sh.n_expert else ""
    print(f"[synthetic] {args.shape} ({sh.note}) {args.type}: {sh.arch}, {sh.n_layer} layers, n_embd {sh.n_embd}, "
          f"heads {sh.n_head}/{sh.n_head_kv} of {sh.hd}, ffn {sh.n_ff}{experts}, vocab {n_vocab}, "
          f"{'tied' if tied else 'untied'} output, {n_params / 1e9:.3f} B params, tensor types {types}, "
          f"{data_bytes / 2**30:.2f} GiB -> {out}", file=sys.stderr)

    if args.header_only:  # the data stays a hole: sizes and offsets are what a dry run reads
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_ti_data_to_file()
        fout = w.fout[0]
        fout.truncate(GGUFWriter.ggml_pad(fout.tell(), align) + data_bytes)
        w.close()
        print(f"[synthetic] wrote the header; the file reads as {os.path.getsize(out) / 2**30:.2f} GiB "
              f"(sparse)", file=sys.stderr)
        return

    rng = np.random.default_rng(args.seed)
    pools = {}
    for qt, scale in sorted({(s.qtype, s.std_scale) for s in specs if s.fixed is None}):
        pools[qt, scale] = make_pool(qt, rng, args.std * scale)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    fout = w.fout[0]
    fout.write(b"\0" * (GGUFWriter.ggml_pad(fout.tell(), align) - fout.tell()))
    prog = Progress(data_bytes)
    t0 = time.time()
    for s in specs:
        _, ts = GGML_QUANT_SIZES[s.qtype]
        left = s.nbytes
        if s.fixed is not None:
            fout.write(s.fixed.astype(np.float32).tobytes())
            left = 0
        else:
            pool = pools[s.qtype, s.std_scale]
            n_pool_blocks = len(pool) // ts
        while left:
            n = min(left, CHUNK_BYTES // ts * ts)  # whole blocks: a block split across chunks would
                                                   # start the next chunk mid-block (random scales)
            while n:  # a random block-aligned slice of the pool, wrapping
                off = int(rng.integers(0, n_pool_blocks)) * ts
                k = min(n, len(pool) - off)
                fout.write(memoryview(pool[off:off + k]))
                n -= k
                left -= k
                prog.add(k)
        pad = GGUFWriter.ggml_pad(s.nbytes, align) - s.nbytes
        fout.write(b"\0" * pad)
        prog.add(pad + (s.nbytes if s.fixed is not None else 0))
    prog.add(0, final=True)
    w.close()
    dt = time.time() - t0
    print(f"[synthetic] wrote {os.path.getsize(out) / 2**30:.2f} GiB in {dt:.1f}s", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", choices=sorted(SHAPES))
    ap.add_argument("--type", choices=list(TYPES), default="Q4_K")
    ap.add_argument("-o", "--output")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--std", type=float, default=STD, help="standard deviation of the weights (default %(default)s)")
    ap.add_argument("--expert-type", choices=list(TYPES), help="the routed experts' type (default: --type)")
    ap.add_argument("--header-only", action="store_true", help="header and tensor table only, data a sparse hole")
    ap.add_argument("--n-layer", type=int, default=0, help="override the shape's layer count")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--tied", dest="tied", action="store_true", default=None, help="no output.weight")
    g.add_argument("--untied", dest="tied", action="store_false", help="write output.weight")
    ap.add_argument("--tokenizer-from", default=DEFAULT_TOKENIZER,
                    help="GGUF to copy tokenizer.* keys from (default: %(default)s)")
    ap.add_argument("--list", action="store_true", help="list the named shapes and exit")
    args = ap.parse_args()
    if args.list:
        for k, s in SHAPES.items():
            print(f"{k:16s} {s.arch:9s} layers {s.n_layer:3d}  embd {s.n_embd:5d}  heads {s.n_head:3d}/{s.n_head_kv:<3d} "
                  f"ffn {s.n_ff:6d}  ctx {s.n_ctx:5d}  rope {s.rope_base:g}  {'tied' if s.tied else 'untied'}"
                  f"  ({s.note})")
        return
    if not args.shape or not args.output:
        ap.error("--shape and -o are required")
    write_model(args)


if __name__ == "__main__":
    main()
