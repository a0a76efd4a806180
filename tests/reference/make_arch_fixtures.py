#!/usr/bin/env python3
"""Tiny random-weight models of each supported architecture, and their reference outputs.

The weights come from a counter-based generator (splitmix64 of an FNV-1a hash of the tensor
name and the value index) that tests/support/tiny_model.cpp reimplements, so the C++ tests
build the same GGUF files (same keys, values and tensors, in the same order) without
committing any. This script writes each model with the `gguf` package, runs
reference_forward.py on it and records in tests/fixtures/model/tiny_arch_logits.json:
  * the logits of every position of a short token sequence,
  * a greedy continuation of it (ids and the reference's top-1/top-2 margins),
  * the teacher-forced top-1 of every position of a longer sequence (and its margins).

Covered: llama (tied output, llama3 rope_freqs factors), mistral (GQA 4:1, linear rope
scaling, separate output), qwen2 (QKV biases, NeoX rope, partial rotary dims), qwen3 (QK-norm,
head size other than n_embd / n_head), qwen3moe (8 experts, 2 used, softmax, normalised),
llama with experts (mixtral's layout, 4 experts) and a variant with shared experts and a
sigmoid router whose weights are scaled and not normalised, gemma2 (sliding window on every
other layer, attention and final soft-capping, GeGLU, post-norms, scaled embeddings), gemma3
(QK-norm, sliding window with its own RoPE base, linear scaling on the global layer), phi3
(fused qkv and gate/up, LongRoPE long factors with an attention factor), gpt-oss (biases, sinks,
a window on every other layer, YaRN, MXFP4 experts with biases, its router and clamped SwiGLU),
deepseek2 (latent attention with a low-rank query, YaRN with its attention scale, a dense first
layer, sigmoid routing over groups with a selection bias, a shared expert) and deepseek2-lite
(no low-rank query, softmax routing, two shared experts).

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
from reference_forward import RefModel, top2_margin  # noqa: E402

MASK = (1 << 64) - 1
OUT = os.path.join(os.path.dirname(__file__), "..", "fixtures", "model", "tiny_arch_logits.json")
OUT_QUANT = os.path.join(os.path.dirname(__file__), "..", "fixtures", "model", "tiny_quant_logits.json")

BASE = dict(n_vocab=96, n_embd=64, n_layer=2, n_head=4, n_head_kv=2, n_ff=96, n_rot=16, rope_base=10000.0,
            rope_freqs=False, tied=True, qkv_bias=False, linear_scale=0.0)


def config(name: str, arch: str, **kw) -> dict:
    return {**BASE, "name": name, "arch": arch, **kw}


CONFIGS = [
    config("llama", "llama", rope_freqs=True),
    config("mistral", "mistral", n_head_kv=1, rope_base=1000000.0, tied=False, linear_scale=2.0),
    config("qwen2", "qwen2", n_rot=8, rope_base=1000000.0, tied=False, qkv_bias=True),
    config("qwen3", "qwen3", head_dim=32, n_rot=32, rope_base=1000000.0, qk_norm=True),
    config("qwen3moe", "qwen3moe", n_rot=16, rope_base=1000000.0, qk_norm=True, n_expert=8, n_expert_used=2,
           n_ff_exp=32),
    config("mixtral", "llama", n_expert=4, n_expert_used=2, n_ff=48, tied=False),
    config("llama-moe-shared", "llama", n_expert=6, n_expert_used=3, n_ff=32, n_ff_shexp=40, gating=2,
           norm_weights=False, weights_scale=1.5),
    config("gemma2", "gemma2", n_layer=3, tied=False, n_rot=16, post_norms=True, swa=4, attn_softcap=2.0, final_softcap=3.0),
    config("gemma3", "gemma3", n_layer=3, tied=False, n_head_kv=1, head_dim=32, n_rot=32, rope_base=1000000.0, qk_norm=True,
           post_norms=True, swa=4, swa_pattern=3, rope_base_swa=10000.0, linear_scale=4.0),
    config("phi3", "phi3", n_rot=16, tied=False, fused=True, orig_ctx=32, attn_factor=1.19, rope_factors=True),
    config("gpt-oss", "gpt-oss", head_dim=16, n_ff=32, tied=False, n_expert=4, n_expert_used=2, n_ff_exp=32, swa=4,
           expert_type="MXFP4", extra_str={"rope.scaling.type": "yarn"}, extra_f32={"rope.scaling.factor": 4.0},
           extra_u32={"rope.scaling.original_context_length": 16}),
    config("deepseek2", "deepseek2", n_layer=3, n_head_kv=1, head_dim=40, n_rot=8, tied=False, n_expert=8,
           n_expert_used=2, n_ff_exp=32, value_length=32, gating=2, norm_weights=True, weights_scale=2.5, optional_tensors=True,
           extra_str={"rope.scaling.type": "yarn"},
           extra_f32={"rope.scaling.factor": 4.0, "rope.scaling.yarn_log_multiplier": 0.1},
           extra_u32={"rope.scaling.original_context_length": 16, "attention.q_lora_rank": 32,
                      "attention.kv_lora_rank": 32, "attention.key_length_mla": 40,
                      "attention.value_length_mla": 16, "leading_dense_block_count": 1, "expert_shared_count": 1,
                      "expert_group_count": 4, "expert_group_used_count": 2}),
    config("deepseek2-lite", "deepseek2", n_layer=2, n_head_kv=1, head_dim=40, n_rot=8, tied=False, n_expert=4,
           n_expert_used=2, n_ff_exp=32, value_length=32, gating=1, norm_weights=False, weights_scale=1.0,
           extra_u32={"attention.kv_lora_rank": 32, "attention.key_length_mla": 40,
                      "attention.value_length_mla": 16, "leading_dense_block_count": 1, "expert_shared_count": 2}),
    # YaRN on an architecture of no YaRN of its own, as a Qwen2.5 file extended past its training.
    config("qwen2-yarn", "qwen2", n_rot=8, rope_base=1000000.0, tied=False, qkv_bias=True,
           extra_str={"rope.scaling.type": "yarn"}, extra_f32={"rope.scaling.factor": 4.0},
           extra_u32={"rope.scaling.original_context_length": 16}),
    # A llama file with biases on q, k, v and the attention's output, which llama.cpp reads when present.
    config("llama-biases", "llama", tied=False, qkv_bias=True, out_bias=True),
    # YaRN on Gemma 3's global layers only: its window layers rotate apart, at scale 1.
    config("gemma3-yarn", "gemma3", n_layer=3, tied=False, n_head_kv=1, head_dim=32, n_rot=32, rope_base=1000000.0,
           qk_norm=True, post_norms=True, swa=4, swa_pattern=3, rope_base_swa=10000.0,
           extra_str={"rope.scaling.type": "yarn"}, extra_f32={"rope.scaling.factor": 4.0},
           extra_u32={"rope.scaling.original_context_length": 16}),
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
N_GREEDY = 24
N_TEACHER = 48
N_CTX = 64  # the context the C++ test runs with (phi3's long factors: more than orig_ctx)
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
    if qtype == "MXFP4":  # the e8m0 exponent byte: a scale of 2^-7 or 2^-6 (ggml's half scale)
        raw[:, 0] = 121 + (raw[:, 0] & 1)
        return raw.reshape(rows, -1)
    for off, e in QUANT_SCALES[qtype]:
        r = raw[:, off].astype(np.uint16)
        bits = ((r & 8) << 12) | np.uint16((e + 15) << 10) | ((r & 7) << 7)
        raw[:, off:off + 2] = bits.astype("<u2").view(np.uint8).reshape(n_blocks, 2)
    return raw.reshape(rows, -1)


def listed_scale(name: str) -> tuple[float, float]:
    """The values of a deepseek2 or gpt-oss tensor, by its name: norms near 1, embeddings and
    routers 0.5, biases 0.1, sinks 0.5, other matrices 0.2."""
    if name.endswith("norm.weight"):
        return 0.1, 1.0
    if name.endswith(".bias"):
        return 0.1, 0.0
    if "token_embd" in name or "ffn_gate_inp" in name or "attn_sinks" in name:
        return 0.5, 0.0
    return 0.2, 0.0


def listed_tensors(c: dict):
    """deepseek2's and gpt-oss's tensors, (name, shape in numpy order), as llama.cpp's converter
    names and shapes them (the C++ side writes models/arch_tensors' list)."""
    E, V, H, X, Fe = c["n_embd"], c["n_vocab"], c["n_head"], c.get("n_expert", 0), c.get("n_ff_exp", 0)
    u = c.get("extra_u32", {})
    out = [("token_embd.weight", (V, E)), ("output_norm.weight", (E,)), ("output.weight", (V, E))]
    for il in range(c["n_layer"]):
        p = f"blk.{il}."
        out.append((p + "attn_norm.weight", (E,)))
        if c["arch"] == "gpt-oss":
            hd = c["head_dim"]
            q, kv = H * hd, c["n_head_kv"] * hd
            out += [(p + "attn_q.weight", (q, E)), (p + "attn_q.bias", (q,)), (p + "attn_k.weight", (kv, E)),
                    (p + "attn_k.bias", (kv,)), (p + "attn_v.weight", (kv, E)), (p + "attn_v.bias", (kv,)),
                    (p + "attn_output.weight", (E, q)), (p + "attn_output.bias", (E,)), (p + "attn_sinks.weight", (H,)),
                    (p + "post_attention_norm.weight", (E,)), (p + "ffn_gate_inp.weight", (X, E)),
                    (p + "ffn_gate_inp.bias", (X,))]
            for m, shape in (("gate", (X, Fe, E)), ("up", (X, Fe, E)), ("down", (X, E, Fe))):
                out += [(p + f"ffn_{m}_exps.weight", shape), (p + f"ffn_{m}_exps.bias", shape[:2])]
            continue
        rope, kvl, qa = c["n_rot"], u["attention.kv_lora_rank"], u.get("attention.q_lora_rank", 0)
        nope, vh = u["attention.key_length_mla"] - rope, u["attention.value_length_mla"]
        if qa:
            out += [(p + "attn_q_a_norm.weight", (qa,)), (p + "attn_q_a.weight", (qa, E)),
                    (p + "attn_q_b.weight", (H * (nope + rope), qa))]
        else:
            out.append((p + "attn_q.weight", (H * (nope + rope), E)))
        out += [(p + "attn_kv_a_norm.weight", (kvl,)), (p + "attn_kv_a_mqa.weight", (kvl + rope, E)),
                (p + "attn_k_b.weight", (H, kvl, nope)), (p + "attn_v_b.weight", (H, vh, kvl)),
                (p + "attn_output.weight", (E, H * vh)), (p + "ffn_norm.weight", (E,))]
        if il < u.get("leading_dense_block_count", 0):
            F = c["n_ff"]
            out += [(p + "ffn_gate.weight", (F, E)), (p + "ffn_up.weight", (F, E)), (p + "ffn_down.weight", (E, F))]
            continue
        out.append((p + "ffn_gate_inp.weight", (X, E)))
        if c.get("optional_tensors"):
            out.append((p + "exp_probs_b.bias", (X,)))
        out += [(p + "ffn_gate_exps.weight", (X, Fe, E)), (p + "ffn_up_exps.weight", (X, Fe, E)),
                (p + "ffn_down_exps.weight", (X, E, Fe))]
        S = Fe * u.get("expert_shared_count", 0)
        if S:
            out += [(p + "ffn_gate_shexp.weight", (S, E)), (p + "ffn_up_shexp.weight", (S, E)),
                    (p + "ffn_down_shexp.weight", (E, S))]
    return [(name, shape, *listed_scale(name)) for name, shape in out]


def tensors(c: dict):
    """(name, shape in numpy order, scale, offset) in the order the C++ side writes them."""
    if c["arch"] in ("deepseek2", "gpt-oss"):
        return listed_tensors(c)
    hd = c.get("head_dim", c["n_embd"] // c["n_head"])
    q, kv, E, F = c["n_head"] * hd, c["n_head_kv"] * hd, c["n_embd"], c["n_ff"]
    norm = (0.1, 1.0)
    out = [("token_embd.weight", (c["n_vocab"], E), 0.5, 0.0), ("output_norm.weight", (E,), *norm)]
    if not c["tied"]:
        out.append(("output.weight", (c["n_vocab"], E), 0.2, 0.0))
    n_exp = c.get("n_expert", 0)
    for il in range(c["n_layer"]):
        p = f"blk.{il}."
        out.append((p + "attn_norm.weight", (E,), *norm))
        if c.get("fused"):
            out.append((p + "attn_qkv.weight", (q + 2 * kv, E), 0.2, 0.0))
        else:
            out += [(p + "attn_q.weight", (q, E), 0.2, 0.0), (p + "attn_k.weight", (kv, E), 0.2, 0.0),
                    (p + "attn_v.weight", (kv, E), 0.2, 0.0)]
        out.append((p + "attn_output.weight", (E, q), 0.2, 0.0))
        if c.get("qk_norm"):
            out += [(p + "attn_q_norm.weight", (hd,), *norm), (p + "attn_k_norm.weight", (hd,), *norm)]
        if c.get("post_norms"):
            out += [(p + "post_attention_norm.weight", (E,), *norm), (p + "post_ffw_norm.weight", (E,), *norm)]
        out.append((p + "ffn_norm.weight", (E,), *norm))
        if n_exp:
            Fe = c.get("n_ff_exp", F)
            out += [(p + "ffn_gate_inp.weight", (n_exp, E), 0.5, 0.0),
                    (p + "ffn_gate_exps.weight", (n_exp, Fe, E), 0.2, 0.0),
                    (p + "ffn_up_exps.weight", (n_exp, Fe, E), 0.2, 0.0),
                    (p + "ffn_down_exps.weight", (n_exp, E, Fe), 0.2, 0.0)]
            if c.get("n_ff_shexp"):
                S = c["n_ff_shexp"]
                out += [(p + "ffn_gate_shexp.weight", (S, E), 0.2, 0.0), (p + "ffn_up_shexp.weight", (S, E), 0.2, 0.0),
                        (p + "ffn_down_shexp.weight", (E, S), 0.2, 0.0)]
        elif c.get("fused"):
            out += [(p + "ffn_up.weight", (2 * F, E), 0.2, 0.0), (p + "ffn_down.weight", (E, F), 0.2, 0.0)]
        else:
            out += [(p + "ffn_gate.weight", (F, E), 0.2, 0.0), (p + "ffn_up.weight", (F, E), 0.2, 0.0),
                    (p + "ffn_down.weight", (E, F), 0.2, 0.0)]
        if c["qkv_bias"]:
            out += [(p + "attn_q.bias", (q,), 0.1, 0.0), (p + "attn_k.bias", (kv,), 0.1, 0.0),
                    (p + "attn_v.bias", (kv,), 0.1, 0.0)]
        if c.get("out_bias"):
            out.append((p + "attn_output.bias", (E,), 0.1, 0.0))
    if c["rope_freqs"]:
        out.append(("rope_freqs.weight", (c["n_rot"] // 2,), 0.5, 1.5))
    if c.get("rope_factors"):
        out += [("rope_factors_long.weight", (c["n_rot"] // 2,), 0.5, 2.0),
                ("rope_factors_short.weight", (c["n_rot"] // 2,), 0.2, 1.0)]
    return out


# Config entries written only when present, in the C++ writer's order: (entry, how to write it).
OPTIONAL_KEYS = [
    ("n_ff_exp", gguf.GGUFWriter.add_expert_feed_forward_length),
    ("n_ff_shexp", gguf.GGUFWriter.add_expert_shared_feed_forward_length),
    ("gating", lambda w, v: w.add_expert_gating_func(gguf.ExpertGatingFuncType(v))),
    ("norm_weights", gguf.GGUFWriter.add_expert_weights_norm),
    ("weights_scale", gguf.GGUFWriter.add_expert_weights_scale),
    ("swa", gguf.GGUFWriter.add_sliding_window),
    ("swa_pattern", gguf.GGUFWriter.add_sliding_window_pattern),
    ("rope_base_swa", gguf.GGUFWriter.add_rope_freq_base_swa),
    ("attn_softcap", gguf.GGUFWriter.add_attn_logit_softcapping),
    ("final_softcap", gguf.GGUFWriter.add_final_logit_softcapping),
    ("orig_ctx", gguf.GGUFWriter.add_rope_scaling_orig_ctx_len),
    ("attn_factor", gguf.GGUFWriter.add_rope_scaling_attn_factors),
]


def write_vocab(w: gguf.GGUFWriter, v: dict):
    """A SentencePiece vocabulary as the tokenizer_vocab_*.json fixtures hold it."""
    h = v["header"]
    w.add_tokenizer_model(h["tokenizer.ggml.model"])
    w.add_token_list(v["tokens"])
    w.add_token_scores(v["scores"])
    w.add_token_types(v["token_type"])
    for key in ("unknown_token_id", "bos_token_id", "eos_token_id", "seperator_token_id", "padding_token_id"):
        if "tokenizer.ggml." + key in h:
            w.add_uint32("tokenizer.ggml." + key, h["tokenizer.ggml." + key])


def write_model(c: dict, path: str):
    w = gguf.GGUFWriter(path, c["arch"])
    w.add_context_length(c.get("n_ctx_train", 256))
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
    if "head_dim" in c:
        w.add_key_length(c["head_dim"])
        w.add_value_length(c.get("value_length", c["head_dim"]))
    if c.get("n_expert"):
        w.add_expert_count(c["n_expert"])
        w.add_expert_used_count(c["n_expert_used"])
    for key, add in OPTIONAL_KEYS:
        if key in c:
            add(w, c[key])
    for k, v in c.get("extra_u32", {}).items():
        w.add_uint32(f"{c['arch']}.{k}", v)
    for k, v in c.get("extra_f32", {}).items():
        w.add_float32(f"{c['arch']}.{k}", v)
    for k, v in c.get("extra_str", {}).items():
        w.add_string(f"{c['arch']}.{k}", v)
    if "vocab" in c:
        write_vocab(w, c["vocab"])
    for name, shape, scale, offset in tensors(c):
        if c.get("expert_type") and name.endswith("_exps.weight"):
            raw = quant_blocks(name, c["expert_type"], int(np.prod(shape[:-1])), shape[-1])
            w.add_tensor(name, raw.reshape(*shape[:-1], -1), raw_dtype=gguf.GGMLQuantizationType[c["expert_type"]])
            continue
        if qtype != "F32" and len(shape) == 2:
            w.add_tensor(name, quant_blocks(name, qtype, *shape), raw_dtype=gguf.GGMLQuantizationType[qtype])
            continue
        n = int(np.prod(shape))
        w.add_tensor(name, values(name, n, scale, offset).reshape(shape))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def teacher_ids(c: dict) -> list[int]:
    """A fixed pseudo-random sequence of N_TEACHER ids."""
    v = values("teacher:" + c["name"], N_TEACHER, 0.5, 0.5)
    return [int(x * (c["n_vocab"] - 1)) for x in v]


def record_archs():
    """Each architecture: logits, a greedy continuation and teacher-forced top-1, with margins."""
    fixtures = []
    with tempfile.TemporaryDirectory() as d:
        for c in CONFIGS:
            path = os.path.join(d, c["name"] + ".gguf")
            write_model(c, path)
            model = RefModel(path, n_ctx=N_CTX)
            logits = model.forward(IDS)
            margins: list[float] = []
            greedy = model.greedy(IDS, N_GREEDY, margins=margins)
            tf = teacher_ids(c)
            tf_logits = model.forward(tf)
            gaps = getattr(model, "router_gaps", [])
            fixtures.append({
                "config": c,
                "logits": [[round(float(x), 6) for x in row] for row in logits],
                "greedy": greedy, "greedy_margins": [round(m, 6) for m in margins],
                "teacher_ids": tf, "teacher_top1": [int(x) for x in tf_logits.argmax(-1)],
                "teacher_margins": [round(float(m), 6) for m in top2_margin(tf_logits)],
            })
            print(f"{c['name']}: logits {logits.shape}, top-1 {logits.argmax(-1).tolist()}, greedy {greedy[:8]}..., "
                  f"min greedy margin {min(margins):.2e}"
                  + (f", min router gap {min(gaps):.2e}" if gaps else ""), file=sys.stderr)
    with open(OUT, "w") as f:
        json.dump({"generator": "tests/reference/make_arch_fixtures.py", "seed": SEED, "ids": IDS, "n_ctx": N_CTX,
                   "rms_eps": RMS_EPS, "models": fixtures}, f)
        f.write("\n")


def record_quant(configs: list, out: str):
    """Each low-bit weight type in one llama model: the prompt's logits."""
    fixtures = []
    with tempfile.TemporaryDirectory() as d:
        for c in configs:
            name = c["arch"] + "_" + c["weight_type"]
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
    record_archs()
    record_quant([dict(QUANT_CONFIG, weight_type=t) for t in QUANT_SCALES], OUT_QUANT)


if __name__ == "__main__":
    main()
