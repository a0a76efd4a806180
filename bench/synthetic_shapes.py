"""The named model shapes of bench/make_synthetic_gguf.py: each architecture's metadata keys and
tensor list as llama.cpp's converter writes them (llama, qwen3, qwen3moe, gemma2, gemma3, phi3,
and llama with experts for mixtral)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from gguf import GGML_QUANT_SIZES, GGUFWriter
from gguf import GGMLQuantizationType as QT


@dataclass(frozen=True)
class Shape:
    n_layer: int
    n_embd: int
    n_head: int
    n_head_kv: int
    n_ff: int
    n_ctx: int
    rope_base: float
    tied: bool
    note: str
    arch: str = "llama"
    head_dim: int = 0          # 0: n_embd / n_head
    n_expert: int = 0
    n_expert_used: int = 0
    n_ff_exp: int = 0          # qwen3moe's expert width (mixtral's is n_ff)
    longrope_ctx: int = 0      # phi3's LongRoPE: original context (long factors past it), 0: none
    window: int = 0            # gemma's sliding window
    softcap: tuple = (0.0, 0.0)  # gemma2's attention and final logit caps

    @property
    def hd(self) -> int:
        return self.head_dim or self.n_embd // self.n_head


SHAPES = {
    "tiny":           Shape(2,   256,  4,  2,   512, 2048, 10000.0,   False, "test model, 2 layers"),
    "smollm2-135m":   Shape(30,  576,  9,  3,  1536, 8192, 100000.0,  True,  "HuggingFaceTB/SmolLM2-135M"),
    "tinyllama-1.1b": Shape(22, 2048, 32,  4,  5632, 2048, 10000.0,   False, "TinyLlama-1.1B"),
    "llama2-7b":      Shape(32, 4096, 32, 32, 11008, 4096, 10000.0,   False, "Llama-2-7B (MHA)"),
    "llama3-8b":      Shape(32, 4096, 32,  8, 14336, 8192, 500000.0,  False, "Llama-3-8B"),
    "llama3-70b":     Shape(80, 8192, 64,  8, 28672, 8192, 500000.0,  False, "Llama-3-70B"),
    # Test sizes of the other architectures (2-3 layers, every feature of each present).
    "qwen3-tiny":     Shape(2,   256,  4,  2,   512, 2048, 1000000.0, True,  "qwen3 test model (head_dim 128)",
                            arch="qwen3", head_dim=128),
    "qwen3moe-tiny":  Shape(2,   256,  4,  2,   512, 2048, 1000000.0, False, "qwen3moe test model (16 experts, 4 used)",
                            arch="qwen3moe", head_dim=64, n_expert=16, n_expert_used=4, n_ff_exp=128),
    "mixtral-tiny":   Shape(2,   256,  4,  2,   256, 2048, 1000000.0, False, "llama with 4 experts, 2 used",
                            n_expert=4, n_expert_used=2),
    "gemma2-tiny":    Shape(4,   256,  4,  2,   512, 2048, 10000.0,   True,  "gemma2 test model (window 128, caps)",
                            arch="gemma2", head_dim=64, window=128, softcap=(50.0, 30.0)),
    "gemma3-tiny":    Shape(6,   256,  4,  1,   512, 2048, 1000000.0, True,  "gemma3 test model (window 128)",
                            arch="gemma3", head_dim=128, window=128),
    "phi3-tiny":      Shape(2,   256,  4,  4,   512, 4096, 10000.0,   False, "phi3 test model (fused tensors, LongRoPE)",
                            arch="phi3", longrope_ctx=256),
    # Real dimensions of the MoE models the benchmarks run.
    "qwen3-30b-a3b":  Shape(48, 2048, 32,  4,  6144, 40960, 1000000.0, False, "Qwen3-30B-A3B (128 experts, 8 used)",
                            arch="qwen3moe", head_dim=128, n_expert=128, n_expert_used=8, n_ff_exp=768),
    "mixtral-8x7b":   Shape(32, 4096, 32,  8, 14336, 32768, 1000000.0, False, "Mixtral-8x7B (8 experts, 2 used)",
                            n_expert=8, n_expert_used=2),
}


@dataclass
class TensorSpec:
    name: str
    ne: tuple[int, ...]   # ggml order: ne[0] = row length
    qtype: QT
    fixed: np.ndarray | None = None  # F32 values written as they are (norms: ones), not random
    std_scale: float = 1.0           # random values of this times the weights' std

    @property
    def nbytes(self) -> int:
        bs, ts = GGML_QUANT_SIZES[self.qtype]
        n = int(np.prod(self.ne))
        assert self.ne[0] % bs == 0, (self.name, self.ne, self.qtype.name)
        return n // bs * ts


def write_metadata(w: GGUFWriter, sh: Shape) -> None:
    """The architecture's keys, as llama.cpp's converter names them."""
    a = sh.arch
    w.add_uint32(f"{a}.block_count", sh.n_layer)
    w.add_uint32(f"{a}.context_length", sh.n_ctx)
    w.add_uint32(f"{a}.embedding_length", sh.n_embd)
    w.add_uint32(f"{a}.feed_forward_length", sh.n_ff)
    w.add_uint32(f"{a}.attention.head_count", sh.n_head)
    w.add_uint32(f"{a}.attention.head_count_kv", sh.n_head_kv)
    w.add_uint32(f"{a}.rope.dimension_count", sh.hd)
    w.add_float32(f"{a}.rope.freq_base", sh.rope_base)
    w.add_float32(f"{a}.attention.layer_norm_rms_epsilon", 1e-6 if a.startswith("gemma") else 1e-5)
    if sh.head_dim:
        w.add_uint32(f"{a}.attention.key_length", sh.hd)
        w.add_uint32(f"{a}.attention.value_length", sh.hd)
    if sh.n_expert:
        w.add_uint32(f"{a}.expert_count", sh.n_expert)
        w.add_uint32(f"{a}.expert_used_count", sh.n_expert_used)
        if sh.n_ff_exp:
            w.add_uint32(f"{a}.expert_feed_forward_length", sh.n_ff_exp)
    if sh.window:
        w.add_uint32(f"{a}.attention.sliding_window", sh.window)
    if sh.softcap[0]:
        w.add_float32(f"{a}.attn_logit_softcapping", sh.softcap[0])
    if sh.softcap[1]:
        w.add_float32(f"{a}.final_logit_softcapping", sh.softcap[1])
    if sh.longrope_ctx:  # as the converter computes it for a context n_ctx / original long
        w.add_uint32(f"{a}.rope.scaling.original_context_length", sh.longrope_ctx)
        w.add_float32(f"{a}.rope.scaling.attn_factor", float(np.sqrt(1 + np.log(sh.n_ctx / sh.longrope_ctx)
                                                                     / np.log(sh.longrope_ctx))))


# llama.cpp's fallback for rows that are not a multiple of a 256-value type's block
FALLBACK = {QT.Q4_K: QT.Q5_0, QT.Q2_K: QT.Q4_0, QT.Q3_K: QT.Q4_0, QT.IQ4_XS: QT.IQ4_NL}


def tensor_specs(sh: Shape, n_vocab: int, qtype: QT, tied: bool) -> list[TensorSpec]:
    def wt(ne0: int) -> QT:
        bs, _ = GGML_QUANT_SIZES[qtype]
        if ne0 % bs == 0:
            return qtype
        fallback = FALLBACK.get(qtype)
        if fallback is not None and ne0 % GGML_QUANT_SIZES[fallback][0] == 0:
            return fallback
        raise SystemExit(f"row length {ne0} is not a multiple of {bs} ({qtype.name} block size)")

    def norm(name: str, n: int) -> TensorSpec:
        return TensorSpec(name, (n,), QT.F32, np.ones(n, np.float32))

    E, F, hd = sh.n_embd, sh.n_ff, sh.hd
    q, kv = sh.n_head * hd, sh.n_head_kv * hd
    qk_norm = sh.arch in ("qwen3", "qwen3moe", "gemma3")
    post_norms = sh.arch in ("gemma2", "gemma3")
    # With random weights attention averages the values of every position, so the hidden states
    # of a pass grow alike layer after layer and a router ends up sending every token to the
    # same few experts. Attention outputs 10x smaller leave each token its own direction, and
    # the tokens spread over the experts as in a trained model (pp256 of the Qwen3-30B-A3B
    # shape: all 128 experts of every layer, the busiest chosen by 14-34% of the tokens).
    wo_scale = 0.1 if sh.n_expert else 1.0
    specs = [TensorSpec("token_embd.weight", (E, n_vocab), wt(E)),
             norm("output_norm.weight", E)]
    if not tied:
        specs.append(TensorSpec("output.weight", (E, n_vocab), wt(E)))
    for il in range(sh.n_layer):
        p = f"blk.{il}."
        specs.append(norm(p + "attn_norm.weight", E))
        if sh.arch == "phi3":
            specs.append(TensorSpec(p + "attn_qkv.weight", (E, q + 2 * kv), wt(E)))
        else:
            specs += [TensorSpec(p + "attn_q.weight", (E, q), wt(E)), TensorSpec(p + "attn_k.weight", (E, kv), wt(E)),
                      TensorSpec(p + "attn_v.weight", (E, kv), wt(E))]
        specs.append(TensorSpec(p + "attn_output.weight", (q, E), wt(q), std_scale=wo_scale))
        if qk_norm:
            specs += [norm(p + "attn_q_norm.weight", hd),
                      norm(p + "attn_k_norm.weight", hd)]
        if post_norms:
            specs += [norm(p + "post_attention_norm.weight", E),
                      norm(p + "post_ffw_norm.weight", E)]
        specs.append(norm(p + "ffn_norm.weight", E))
        if sh.n_expert:
            Fe, X = sh.n_ff_exp or F, sh.n_expert
            # The router stays F32, as llama.cpp's quantizer leaves it.
            specs += [TensorSpec(p + "ffn_gate_inp.weight", (E, X), QT.F32),
                      TensorSpec(p + "ffn_gate_exps.weight", (E, Fe, X), wt(E)),
                      TensorSpec(p + "ffn_up_exps.weight", (E, Fe, X), wt(E)),
                      TensorSpec(p + "ffn_down_exps.weight", (Fe, E, X), wt(Fe))]
        elif sh.arch == "phi3":
            specs += [TensorSpec(p + "ffn_up.weight", (E, 2 * F), wt(E)), TensorSpec(p + "ffn_down.weight", (F, E), wt(F))]
        else:
            specs += [TensorSpec(p + "ffn_gate.weight", (E, F), wt(E)), TensorSpec(p + "ffn_up.weight", (E, F), wt(E)),
                      TensorSpec(p + "ffn_down.weight", (F, E), wt(F))]
    if sh.longrope_ctx:  # frequency divisors: 1 for short contexts, rising to 8 for long ones
        half = hd // 2
        specs += [TensorSpec("rope_factors_long.weight", (half,), QT.F32, np.linspace(1, 8, half, dtype=np.float32)),
                  TensorSpec("rope_factors_short.weight", (half,), QT.F32, np.linspace(1, 1.5, half, dtype=np.float32))]
    return specs
