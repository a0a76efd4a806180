#!/usr/bin/env python3
"""Tiny random-weight models of each supported architecture, and their reference logits.

The weights come from a counter-based generator (splitmix64 of an FNV-1a hash of the tensor
name and the value index) that tests/support/tiny_model.cpp reimplements, so the C++ tests
build byte-identical GGUF files without committing any. This script writes each model with
the `gguf` package, runs reference_forward.py on it and records the logits of every position
of a short token sequence in tests/fixtures/model/tiny_arch_logits.json.

Covered: llama (tied output, llama3 rope_freqs factors), mistral (GQA 4:1, linear rope
scaling, separate output), qwen2 (QKV biases, NeoX rope, partial rotary dims).

It also writes tests/fixtures/model/tiny_quant_logits.json: a llama whose matrices (embeddings
and output head included) are random valid blocks of one quantized type each (Q2_K, Q3_K,
IQ4_NL, IQ4_XS), from the same generator: each byte is the top byte of a splitmix64 draw, then
every f16 scale field becomes (8 + k) / 8 * 2^e with k the field's low 3 random bits, the sign
its bit 3, and e a per-type exponent (QUANT_SCALES) that keeps the weights near +-0.2. The
reference dequantizes them with gguf-py.

Regenerate (both files):  python3 tests/reference/make_arch_fixtures.py
"""
from __future__ import annotations

import json
import os
import sys
import tempfile

import numpy as np
import gguf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_forward import RefModel  # noqa: E402

MASK = (1 << 64) - 1
OUT = os.path.join(os.path.dirname(__file__), "..", "fixtures", "model", "tiny_arch_logits.json")
OUT_QUANT = os.path.join(os.path.dirname(__file__), "..", "fixtures", "model", "tiny_quant_logits.json")

CONFIGS = [
    dict(arch="llama", n_vocab=96, n_embd=64, n_layer=2, n_head=4, n_head_kv=2, n_ff=96, n_rot=16,
         rope_base=10000.0, rope_freqs=True, tied=True, qkv_bias=False, linear_scale=0.0),
    dict(arch="mistral", n_vocab=96, n_embd=64, n_layer=2, n_head=4, n_head_kv=1, n_ff=96, n_rot=16,
         rope_base=1000000.0, rope_freqs=False, tied=False, qkv_bias=False, linear_scale=2.0),
    dict(arch="qwen2", n_vocab=96, n_embd=64, n_layer=2, n_head=4, n_head_kv=2, n_ff=96, n_rot=8,
         rope_base=1000000.0, rope_freqs=False, tied=False, qkv_bias=True, linear_scale=0.0),
]
QUANT_CONFIG = dict(arch="llama", n_vocab=96, n_embd=256, n_layer=2, n_head=4, n_head_kv=2, n_ff=256, n_rot=64,
                    rope_base=10000.0, rope_freqs=False, tied=True, qkv_bias=False, linear_scale=0.0)
# type -> (byte offset in a block, exponent e) of each f16 scale field
QUANT_SCALES = {
    "Q2_K": [(80, -7), (82, -7)],
    "Q3_K": [(108, -9)],
    "IQ4_NL": [(0, -9)],
    "IQ4_XS": [(0, -13)],
}
SEED = 20261122
IDS = [1, 17, 42, 5, 88, 42, 3, 60, 61, 9]
RMS_EPS = 1e-5


def fnv1a64(s: str) -> int:
    h = 0xCBF29CE484222325
    for b in s.encode():
        h = ((h ^ b) * 0x100000001B3) & MASK
    return h


def draws(name: str, n: int) -> np.ndarray:
    """splitmix64(key + (i + 1) * golden) for i < n, key = FNV-1a(name) ^ SEED."""
    key = (fnv1a64(name) ^ SEED) & MASK
    i = np.arange(n, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = np.uint64(key) + (i + np.uint64(1)) * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return z


def values(name: str, n: int, scale: float, offset: float) -> np.ndarray:
    """offset + scale * u, u uniform in [-1, 1) from splitmix64(key + i * golden)."""
    u = (draws(name, n) >> np.uint64(11)).astype(np.float64) * (2.0 ** -53) * 2.0 - 1.0
    return (offset + scale * u).astype(np.float32)


def quant_blocks(name: str, qtype: str, rows: int, cols: int) -> np.ndarray:
    """rows x (row bytes) of random valid blocks of qtype (see the module docstring)."""
    block_elems, block_bytes = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[qtype]]
    n_blocks = rows * cols // block_elems
    raw = (draws(name, n_blocks * block_bytes) >> np.uint64(56)).astype(np.uint8).reshape(n_blocks, block_bytes)
    for off, e in QUANT_SCALES[qtype]:
        r = raw[:, off].astype(np.uint16)
        bits = ((r & 8) << 12) | np.uint16((e + 15) << 10) | ((r & 7) << 7)
        raw[:, off:off + 2] = bits.astype("<u2").view(np.uint8).reshape(n_blocks, 2)
    return raw.reshape(rows, -1)


def tensors(c: dict):
    """(name, shape as (rows, cols), scale, offset) in the order the C++ side writes them."""
    hd = c["n_embd"] // c["n_head"]
    q, kv, E, F = c["n_head"] * hd, c["n_head_kv"] * hd, c["n_embd"], c["n_ff"]
    out = [("token_embd.weight", (c["n_vocab"], E), 0.5, 0.0), ("output_norm.weight", (E,), 0.1, 1.0)]
    if not c["tied"]:
        out.append(("output.weight", (c["n_vocab"], E), 0.2, 0.0))
    for il in range(c["n_layer"]):
        p = f"blk.{il}."
        out += [(p + "attn_norm.weight", (E,), 0.1, 1.0), (p + "attn_q.weight", (q, E), 0.2, 0.0),
                (p + "attn_k.weight", (kv, E), 0.2, 0.0), (p + "attn_v.weight", (kv, E), 0.2, 0.0),
                (p + "attn_output.weight", (E, q), 0.2, 0.0), (p + "ffn_norm.weight", (E,), 0.1, 1.0),
                (p + "ffn_gate.weight", (F, E), 0.2, 0.0), (p + "ffn_up.weight", (F, E), 0.2, 0.0),
                (p + "ffn_down.weight", (E, F), 0.2, 0.0)]
        if c["qkv_bias"]:
            out += [(p + "attn_q.bias", (q,), 0.1, 0.0), (p + "attn_k.bias", (kv,), 0.1, 0.0),
                    (p + "attn_v.bias", (kv,), 0.1, 0.0)]
    if c["rope_freqs"]:
        out.append(("rope_freqs.weight", (c["n_rot"] // 2,), 0.5, 1.5))
    return out


def write_model(c: dict, path: str):
    a = c["arch"]
    w = gguf.GGUFWriter(path, a)
    w.add_context_length(256)
    w.add_embedding_length(c["n_embd"])
    w.add_block_count(c["n_layer"])
    w.add_feed_forward_length(c["n_ff"])
    w.add_head_count(c["n_head"])
    w.add_head_count_kv(c["n_head_kv"])
    w.add_rope_dimension_count(c["n_rot"])
    w.add_rope_freq_base(c["rope_base"])
    w.add_layer_norm_rms_eps(RMS_EPS)
    if c["linear_scale"]:
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(c["linear_scale"])
    qtype = c.get("weight_type", "F32")
    for name, shape, scale, offset in tensors(c):
        if qtype != "F32" and len(shape) == 2:
            w.add_tensor(name, quant_blocks(name, qtype, *shape), raw_dtype=gguf.GGMLQuantizationType[qtype])
            continue
        n = int(np.prod(shape))
        w.add_tensor(name, values(name, n, scale, offset).reshape(shape))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def record(configs: list, out: str):
    fixtures = []
    with tempfile.TemporaryDirectory() as d:
        for c in configs:
            name = c["arch"] + "_" + c.get("weight_type", "F32")
            path = os.path.join(d, name + ".gguf")
            write_model(c, path)
            logits = RefModel(path).forward(IDS)
            fixtures.append({"config": c, "logits": [[round(float(x), 6) for x in row] for row in logits]})
            print(f"{name}: logits {logits.shape}, top-1 {logits.argmax(-1).tolist()}", file=sys.stderr)
    with open(out, "w") as f:
        json.dump({"generator": "tests/reference/make_arch_fixtures.py", "seed": SEED, "ids": IDS,
                   "rms_eps": RMS_EPS, "models": fixtures}, f)
        f.write("\n")


def main():
    record(CONFIGS, OUT)
    record([dict(QUANT_CONFIG, weight_type=t) for t in QUANT_SCALES], OUT_QUANT)


if __name__ == "__main__":
    main()
