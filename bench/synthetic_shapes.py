"""The named model shapes of bench/make_synthetic_gguf.py: each architecture's metadata keys and
tensor list as llama.cpp's converter writes them (llama, qwen3, qwen3moe, gemma2, gemma3, phi3,
llama with experts for mixtral, deepseek2 and gpt-oss)."""
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
    window: int = 0            # gemma's and gpt-oss's sliding window
    softcap: tuple = (0.0, 0.0)  # gemma2's attention and final logit caps
    n_vocab: int = 0           # 0: the tokenizer's (dry-run headers of the real shapes give their own)
    # deepseek2: latent attention (q_lora_rank 0: queries straight from the hidden state), leading
    # dense layers, shared experts, the router's function (1 softmax, 2 sigmoid with a selection
    # bias), groups, normalised and scaled weights
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope: int = 0
    qk_rope: int = 0
    v_head_dim: int = 0
    n_expert_shared: int = 0
    n_dense_lead: int = 0
    gating: int = 1
    n_group: int = 0
    n_group_used: int = 0
    expert_norm: bool = False
    expert_scale: float = 0.0
    # YaRN (deepseek2, gpt-oss): factor over the original context; deepseek2's log multiplier
    # (0.1 * mscale_all_dim, as the converter writes it)
    yarn: tuple = (0.0, 0, 0.0)

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
    # deepseek2 at test size as DeepSeek-V3 is made: low-rank queries, the latent cache, a dense
    # first layer, 16 experts (4 used) in 4 groups of which 2 are searched, by sigmoid with a
    # selection bias, a shared expert, normalised weights times 2.5, YaRN with its log multiplier.
    "deepseek2-tiny": Shape(3,   256,  4,  1,   512, 4096, 10000.0,   False, "deepseek2 test model (MLA, 16 experts)",
                            arch="deepseek2", n_expert=16, n_expert_used=4, n_ff_exp=128, q_lora_rank=96,
                            kv_lora_rank=64, qk_nope=32, qk_rope=32, v_head_dim=32, n_expert_shared=1,
                            n_dense_lead=1, gating=2, n_group=4, n_group_used=2, expert_norm=True,
                            expert_scale=2.5, yarn=(40.0, 4096, 0.1)),
    # deepseek2 as DeepSeek-V2-Lite is made (llama.cpp reads queries without a low rank only at
    # its 27 layers): queries straight from the hidden state, softmax routing, weights not
    # normalised, two shared experts, V2's YaRN log multiplier.
    "deepseek2-lite-tiny": Shape(27, 128, 2, 1, 256, 4096, 10000.0, False, "deepseek2 test model as V2-Lite (27 layers)",
                            arch="deepseek2", n_expert=8, n_expert_used=2, n_ff_exp=64, kv_lora_rank=32, qk_nope=32,
                            qk_rope=32, v_head_dim=32, n_expert_shared=2, n_dense_lead=1, yarn=(40.0, 4096, 0.0707)),
    # gpt-oss at test size: 4 layers, the even ones sliding over 128 positions, sinks, biases,
    # 8 experts (2 used), YaRN factor 32.
    "gpt-oss-tiny":   Shape(4,   256,  4,  2,   256, 4096, 150000.0,  False, "gpt-oss test model (window 128, sinks)",
                            arch="gpt-oss", head_dim=64, n_expert=8, n_expert_used=2, n_ff_exp=256, window=128,
                            yarn=(32.0, 4096, 0.0)),
    # The real shapes, for dry runs (make_synthetic_gguf.py --header-only: a sparse file).
    "deepseek-v2-lite": Shape(27, 2048, 16, 1, 10944, 163840, 10000.0, False, "DeepSeek-V2-Lite (64 experts, 6 used)",
                            arch="deepseek2", n_expert=64, n_expert_used=6, n_ff_exp=1408, kv_lora_rank=512, qk_nope=128,
                            qk_rope=64, v_head_dim=128, n_expert_shared=2, n_dense_lead=1, n_vocab=102400,
                            yarn=(40.0, 4096, 0.0707)),
    "deepseek-v3":    Shape(61, 7168, 128, 1, 18432, 163840, 10000.0, False, "DeepSeek-V3 671B (256 experts, 8 used)",
                            arch="deepseek2", n_expert=256, n_expert_used=8, n_ff_exp=2048, q_lora_rank=1536,
                            kv_lora_rank=512, qk_nope=128, qk_rope=64, v_head_dim=128, n_expert_shared=1, n_dense_lead=3,
                            gating=2, n_group=8, n_group_used=4, expert_norm=True, expert_scale=2.5, n_vocab=129280,
                            yarn=(40.0, 4096, 0.1)),
    "gpt-oss-20b":    Shape(24, 2880, 64,  8,  2880, 131072, 150000.0, False, "gpt-oss-20b (32 experts, 4 used)",
                            arch="gpt-oss", head_dim=64, n_expert=32, n_expert_used=4, n_ff_exp=2880, window=128,
                            n_vocab=201088, yarn=(32.0, 4096, 0.0)),
    "gpt-oss-120b":   Shape(36, 2880, 64,  8,  2880, 131072, 150000.0, False, "gpt-oss-120b (128 experts, 4 used)",
                            arch="gpt-oss", head_dim=64, n_expert=128, n_expert_used=4, n_ff_exp=2880, window=128,
                            n_vocab=201088, yarn=(32.0, 4096, 0.0)),
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
    w.add_uint32(f"{a}.rope.dimension_count", sh.qk_rope or sh.hd)
    if sh.yarn[0]:
        w.add_string(f"{a}.rope.scaling.type", "yarn")
        w.add_float32(f"{a}.rope.scaling.factor", sh.yarn[0])
        w.add_uint32(f"{a}.rope.scaling.original_context_length", sh.yarn[1])
        if sh.yarn[2]:
            w.add_float32(f"{a}.rope.scaling.yarn_log_multiplier", sh.yarn[2])
    if a == "deepseek2":  # as conversion/deepseek.py: the cached row as key/value length, the heads' as *_mla
        w.add_uint32(f"{a}.attention.kv_lora_rank", sh.kv_lora_rank)
        if sh.q_lora_rank:
            w.add_uint32(f"{a}.attention.q_lora_rank", sh.q_lora_rank)
        w.add_uint32(f"{a}.attention.key_length", sh.kv_lora_rank + sh.qk_rope)
        w.add_uint32(f"{a}.attention.value_length", sh.kv_lora_rank)
        w.add_uint32(f"{a}.attention.key_length_mla", sh.qk_nope + sh.qk_rope)
        w.add_uint32(f"{a}.attention.value_length_mla", sh.v_head_dim)
        w.add_uint32(f"{a}.leading_dense_block_count", sh.n_dense_lead)
        w.add_uint32(f"{a}.expert_shared_count", sh.n_expert_shared)
        w.add_uint32(f"{a}.expert_gating_func", sh.gating)
        if sh.expert_norm:
            w.add_bool(f"{a}.expert_weights_norm", True)
        if sh.expert_scale:
            w.add_float32(f"{a}.expert_weights_scale", sh.expert_scale)
        if sh.n_group:
            w.add_uint32(f"{a}.expert_group_count", sh.n_group)
            w.add_uint32(f"{a}.expert_group_used_count", sh.n_group_used)
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
    if a == "deepseek2" and not sh.n_ff_exp:
        raise SystemExit("deepseek2 shapes name their experts' width")
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


def type_for_rows(qtype: QT, ne0: int) -> QT:
    """qtype for rows of ne0 values, or llama.cpp's fallback where they do not fill its blocks."""
    bs, _ = GGML_QUANT_SIZES[qtype]
    if ne0 % bs == 0:
        return qtype
    fallback = FALLBACK.get(qtype)
    if fallback is not None and ne0 % GGML_QUANT_SIZES[fallback][0] == 0:
        return fallback
    raise SystemExit(f"row length {ne0} is not a multiple of {bs} ({qtype.name} block size)")


def model_ends(n_embd: int, n_vocab: int, qtype: QT, tied: bool) -> list[TensorSpec]:
    """The embedding, the output norm (ones) and, unless tied, the output matrix."""
    specs = [TensorSpec("token_embd.weight", (n_embd, n_vocab), qtype),
             TensorSpec("output_norm.weight", (n_embd,), QT.F32, np.ones(n_embd, np.float32))]
    if not tied:
        specs.append(TensorSpec("output.weight", (n_embd, n_vocab), qtype))
    return specs


def tensor_specs(sh: Shape, n_vocab: int, qtype: QT, tied: bool) -> list[TensorSpec]:
    def wt(ne0: int) -> QT:
        return type_for_rows(qtype, ne0)

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
    specs = model_ends(E, n_vocab, wt(E), tied)
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


def moe_tensor_specs(sh: Shape, n_vocab: int, wt, expert_wt, tied: bool) -> list[TensorSpec]:
    """deepseek2's and gpt-oss's tensors (llama.cpp's src/models/deepseek2.cpp, openai-moe.cpp).
    wt(ne0) gives the type of a matrix whose rows are ne0 long; expert_wt the routed experts'."""
    def norm(name: str, n: int) -> TensorSpec:
        return TensorSpec(name, (n,), QT.F32, np.ones(n, np.float32))

    def vec(name: str, *ne: int, scale: float = 1.0) -> TensorSpec:  # random F32 (biases, sinks)
        return TensorSpec(name, tuple(ne), QT.F32, std_scale=scale)

    E, H, X, Fe = sh.n_embd, sh.n_head, sh.n_expert, sh.n_ff_exp

    def experts(p: str, biases: bool) -> list[TensorSpec]:  # the router and the experts' matrices
        out = [TensorSpec(p + "ffn_gate_inp.weight", (E, X), QT.F32)]
        for name, ne, ne0 in (("gate", (E, Fe, X), E), ("up", (E, Fe, X), E), ("down", (Fe, E, X), Fe)):
            out.append(TensorSpec(p + f"ffn_{name}_exps.weight", ne, expert_wt(ne0)))
            if biases:
                out.append(vec(p + f"ffn_{name}_exps.bias", ne[1], X))
        return out

    specs = model_ends(E, n_vocab, wt(E), tied)
    for il in range(sh.n_layer):
        p = f"blk.{il}."
        specs.append(norm(p + "attn_norm.weight", E))
        if sh.arch == "deepseek2":
            kh = sh.qk_nope + sh.qk_rope
            if sh.q_lora_rank:
                specs += [norm(p + "attn_q_a_norm.weight", sh.q_lora_rank),
                          TensorSpec(p + "attn_q_a.weight", (E, sh.q_lora_rank), wt(E)),
                          TensorSpec(p + "attn_q_b.weight", (sh.q_lora_rank, H * kh), wt(sh.q_lora_rank))]
            else:
                specs.append(TensorSpec(p + "attn_q.weight", (E, H * kh), wt(E)))
            specs += [norm(p + "attn_kv_a_norm.weight", sh.kv_lora_rank),
                      TensorSpec(p + "attn_kv_a_mqa.weight", (E, sh.kv_lora_rank + sh.qk_rope), wt(E)),
                      TensorSpec(p + "attn_k_b.weight", (sh.qk_nope, sh.kv_lora_rank, H), wt(sh.qk_nope)),
                      TensorSpec(p + "attn_v_b.weight", (sh.kv_lora_rank, sh.v_head_dim, H), wt(sh.kv_lora_rank)),
                      TensorSpec(p + "attn_output.weight", (H * sh.v_head_dim, E), wt(H * sh.v_head_dim), std_scale=0.1),
                      norm(p + "ffn_norm.weight", E)]
            if il < sh.n_dense_lead:
                specs += [TensorSpec(p + "ffn_gate.weight", (E, sh.n_ff), wt(E)),
                          TensorSpec(p + "ffn_up.weight", (E, sh.n_ff), wt(E)),
                          TensorSpec(p + "ffn_down.weight", (sh.n_ff, E), wt(sh.n_ff))]
                continue
            Fs = Fe * sh.n_expert_shared
            specs += experts(p, False) + [
                      TensorSpec(p + "ffn_gate_shexp.weight", (E, Fs), wt(E)),
                      TensorSpec(p + "ffn_up_shexp.weight", (E, Fs), wt(E)),
                      TensorSpec(p + "ffn_down_shexp.weight", (Fs, E), wt(Fs))]
            if sh.gating == 2:  # the selection bias, large enough to change choices
                specs.append(vec(p + "exp_probs_b.bias", X, scale=5.0))
        else:
            q, kv = H * sh.hd, sh.n_head_kv * sh.hd
            specs += [TensorSpec(p + "attn_q.weight", (E, q), wt(E)), vec(p + "attn_q.bias", q),
                      TensorSpec(p + "attn_k.weight", (E, kv), wt(E)), vec(p + "attn_k.bias", kv),
                      TensorSpec(p + "attn_v.weight", (E, kv), wt(E)), vec(p + "attn_v.bias", kv),
                      TensorSpec(p + "attn_output.weight", (q, E), wt(q), std_scale=0.1), vec(p + "attn_output.bias", E),
                      vec(p + "attn_sinks.weight", H, scale=10.0),  # logits of order 1
                      norm(p + "post_attention_norm.weight", E), vec(p + "ffn_gate_inp.bias", X)] + experts(p, True)
    return specs
