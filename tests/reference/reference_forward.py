#!/usr/bin/env python3
"""Independent numpy reference forward pass for GGUF models of the architectures Strata runs.

This is a test oracle, written from the model definitions (Hugging Face's modeling files and
the GGUF conventions llama.cpp's converter writes) rather than from Strata's C++ code: it
reads a GGUF with `gguf.GGUFReader`, dequantizes every weight with `gguf.quants.dequantize`
and runs a plain dense forward pass in float64 (the default; `dtype=np.float32` is available
for speed).  It is slow and simple on purpose.

Conventions (llama.cpp's, which GGUF files follow):
  * A GGUF tensor with ne = [ne0, ne1] is a row-major numpy array of shape
    (ne1, ne0); a linear layer is y = x @ W.T  (ne0 = input features).  A 3-D expert
    tensor [ne0, ne1, n_expert] is (n_expert, ne1, ne0): expert e's matrix is W[e].
  * RoPE in llama.cpp's "normal" mode (llama, mistral): adjacent pairs (x[2i], x[2i+1])
    rotate by pos * base^(-2i/n_rot) (the HF->GGUF converter permutes Q/K rows so this is
    right for HF-trained llamas too); NeoX mode (qwen2, qwen3, qwen3moe, gemma2, gemma3,
    phi3): pairs (x[i], x[i + n_rot/2]).
  * Only the first n_rot (`<arch>.rope.dimension_count`, default head_dim) dims of each head
    rotate.  Base `<arch>.rope.freq_base` (default 10000).  Linear rope scaling
    (`<arch>.rope.scaling.factor`) and llama-3 style `rope_freqs.weight` frequency factors
    are honoured; phi3's LongRoPE divides the frequencies by `rope_factors_long.weight` when
    the context is longer than `rope.scaling.original_context_length`, else by
    `rope_factors_short.weight`, and multiplies cos and sin by `rope.scaling.attn_factor`.
  * GQA: query head h uses kv head h // (n_head / n_head_kv).  Head size
    `<arch>.attention.key_length` (default n_embd / n_head).
  * RMSNorm: x / sqrt(mean(x^2) + eps) * w, eps from
    `<arch>.attention.layer_norm_rms_epsilon`.  Gemma's RMSNorm multiplies by (1 + w):
    the converter stores 1 + w, so the same formula holds for GGUF files.
  * qwen2: Q/K/V biases (`attn_{q,k,v}.bias`).  qwen3, qwen3moe, gemma3: RMSNorm of each
    head of q and k (`attn_{q,k}_norm`) before RoPE.
  * gemma2 / gemma3: embeddings times sqrt(n_embd); attention output and FFN output each
    normed again (`post_attention_norm`, `post_ffw_norm`) before the residual add; GeGLU FFN
    (GELU, tanh approximation); queries scaled by query_pre_attn_scalar^-1/2, which GGUF does
    not record: head_dim, or n_embd / n_head for the 27B models (46 / 62 layers), as
    llama.cpp; sliding-window layers (`attention.sliding_window`: a query at p sees keys
    p - window + 1 .. p) where `attention.sliding_window_pattern` (default 2 for gemma2,
    6 for gemma3) says: of every `pattern` layers all but the last slide; their RoPE base is
    `rope.freq_base_swa` (gemma3 default 10000, unscaled; gemma2: the global base);
    gemma2 soft-caps scores (`attn_logit_softcapping`: s -> c tanh(s / c)) and both cap the
    logits when `final_logit_softcapping` is given.
  * phi3: `attn_qkv` holds the q, k and v rows; `ffn_up` holds the gate rows then the up rows.
  * Mixture of experts (qwen3moe, llama with `expert_count`): router logits x @ ffn_gate_inp.T,
    probabilities by softmax (`expert_gating_func` 1, default) or sigmoid (2), the
    `expert_used_count` most probable experts, their probabilities divided by their sum
    (`expert_weights_norm`, default true) and times `expert_weights_scale`; the output is the
    weighted sum of the chosen experts' SwiGLU FFNs (`ffn_{gate,up,down}_exps`), plus the
    shared experts' FFN (`ffn_*_shexp`) when the model has them.
  * FFN: down(silu(gate(x)) * up(x)).
  * deepseek2 and gpt-oss: YaRN, latent attention, their routing and gpt-oss's experts as
    reference_blocks.py describes; gpt-oss's attention adds biases and a sink logit per head to
    each softmax's denominator, its even layers slide over `attention.sliding_window` positions,
    and its `post_attention_norm` is the feed-forward's input norm.
  * Output head `output.weight`, or tied to `token_embd.weight` when absent.

Usage as a library:
    from reference_forward import RefModel
    m = RefModel(path)
    logits = m.forward(ids)                 # (len(ids), n_vocab), positions 0..
    states = m.hidden(ids)                  # (len(ids), n_embd): after the output norm
    cache = m.new_cache(); m.forward(ids[:5], cache); m.forward(ids[5:], cache)
    out = m.greedy(prompt_ids, n=64)        # list of generated ids

CLI (prints top-5 of the last position, or a greedy continuation):
    python3 reference_forward.py MODEL.gguf --ids 1 403 407 261 378 [--greedy 32]
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

from reference_blocks import mla_attention, oss_expert, route, sink_softmax, yarn_inv_freq, yarn_mscale


def _field(reader: GGUFReader, key: str, default=None):
    f = reader.fields.get(key)
    if f is None:
        return default
    v = f.contents()
    return v


NEOX = {"llama": False, "mistral": False, "qwen2": True, "qwen3": True, "qwen3moe": True,
        "gemma2": True, "gemma3": True, "phi3": True, "deepseek2": False, "gpt-oss": True}  # arch -> RoPE in NeoX mode
LAYER_LISTED = {"deepseek2", "gpt-oss"}  # every tensor of a layer loaded under its name (biases: name_b)
QK_NORM = {"qwen3", "qwen3moe", "gemma3"}
GEMMA = {"gemma2", "gemma3"}
SWA_PATTERN = {"gemma2": 2, "gemma3": 6}


@dataclass
class Hparams:
    arch: str
    n_layer: int
    n_embd: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_ff: int
    n_vocab: int
    n_rot: int
    rope_base: float
    rope_scale: float  # positions are multiplied by this (1/linear factor)
    rope_neox: bool
    rms_eps: float
    n_ctx_train: int
    kq_scale: float = 0.0
    attn_softcap: float = 0.0
    final_softcap: float = 0.0
    window: int = 0                     # sliding window of the layers in `swa`
    swa: list = field(default_factory=list)
    rope_base_swa: float = 10000.0
    rope_scale_swa: float = 1.0
    attn_factor_swa: float = 1.0  # the window layers' rotation magnitude (Gemma 3's rotate apart, no YaRN)
    attn_factor: float = 1.0
    n_ctx_orig: int = 0
    n_expert: int = 0
    n_expert_used: int = 0
    gating: int = 1                     # 1 softmax, 2 sigmoid
    norm_weights: bool = True
    weights_scale: float = 1.0
    n_group: int = 0                    # deepseek2's expert groups, and how many are used
    n_group_used: int = 0
    n_dense_lead: int = 0               # deepseek2's leading dense layers
    qk_nope: int = 0                    # deepseek2's latent attention
    qk_rope: int = 0
    kv_lora_rank: int = 0
    v_head_dim: int = 0


class KVCache:
    """Per-layer K/V arrays (positions, n_head_kv, head_dim), grown by append."""

    def __init__(self, n_layer: int):
        self.k: list[np.ndarray | None] = [None] * n_layer
        self.v: list[np.ndarray | None] = [None] * n_layer
        self.n = 0  # positions already stored

    def append(self, il: int, k: np.ndarray, v: np.ndarray):
        if self.k[il] is None:
            self.k[il], self.v[il] = k, v
        else:
            self.k[il] = np.concatenate([self.k[il], k], axis=0)
            self.v[il] = np.concatenate([self.v[il], v], axis=0)
        return self.k[il], self.v[il]


class RefModel:
    def __init__(self, path: str, dtype=np.float64, verbose: bool = False, n_ctx: int = 0):
        """n_ctx: the context the model runs with (phi3 picks its RoPE factors by it);
        0: the training context."""
        self.path = path
        self.dtype = dtype
        r = GGUFReader(path)
        arch = _field(r, "general.architecture")
        if arch not in NEOX:
            raise ValueError(f"unsupported architecture {arch!r} (supported: {sorted(NEOX)})")
        self.tensors = {t.name: t for t in r.tensors}

        def a(key, default=None):
            return _field(r, f"{arch}.{key}", default)

        n_embd = int(a("embedding_length"))
        n_head = int(a("attention.head_count"))
        n_head_kv = int(a("attention.head_count_kv", n_head))
        head_dim = int(a("attention.key_length", n_embd // n_head))
        n_layer = int(a("block_count"))
        tok = self.tensors["token_embd.weight"]
        n_vocab = int(tok.shape[1])  # ne1
        factor = float(a("rope.scaling.factor", 0.0) or 0.0)
        scale = 1.0 / factor if factor else 1.0
        hp = self.hp = Hparams(
            arch=arch, n_layer=n_layer, n_embd=n_embd, n_head=n_head, n_head_kv=n_head_kv,
            head_dim=head_dim, n_ff=int(a("feed_forward_length")), n_vocab=n_vocab,
            n_rot=int(a("rope.dimension_count", head_dim)),
            rope_base=float(a("rope.freq_base", 10000.0)), rope_scale=scale, rope_neox=NEOX[arch],
            rms_eps=float(a("attention.layer_norm_rms_epsilon", 1e-5)),
            n_ctx_train=int(a("context_length", 0)))
        hp.kq_scale = 1.0 / np.sqrt(head_dim)
        hp.swa = [False] * n_layer
        if arch in GEMMA:
            big = (arch == "gemma2" and n_layer == 46) or (arch == "gemma3" and n_layer == 62)
            if big:
                hp.kq_scale = 1.0 / np.sqrt(n_embd // n_head)
            hp.final_softcap = float(a("final_logit_softcapping", 0.0))
            if arch == "gemma2":
                hp.attn_softcap = float(a("attn_logit_softcapping", 0.0))
            hp.window = int(a("attention.sliding_window", 4096 if arch == "gemma2" else 0))
            pattern = a("attention.sliding_window_pattern", SWA_PATTERN[arch])
            if isinstance(pattern, list):
                hp.swa = [bool(x) for x in pattern]
            else:
                p = int(pattern)
                hp.swa = [p == 0 or il % p < p - 1 for il in range(n_layer)] if hp.window else hp.swa
            hp.rope_base_swa = float(a("rope.freq_base_swa", hp.rope_base if arch == "gemma2" else 10000.0))
            hp.rope_scale_swa = hp.rope_scale if arch == "gemma2" else 1.0
        hp.attn_factor = float(a("rope.scaling.attn_factor", 1.0))
        hp.attn_factor_swa = hp.attn_factor
        # Gemma 3's window layers rotate by their own base at scale 1: YaRN leaves them as they are
        # (ggml's magnitude and ramp, per rope, come to nothing at scale 1).
        local_rope = arch == "gemma3"
        hp.n_ctx_orig = int(a("rope.scaling.original_context_length", hp.n_ctx_train))
        hp.n_expert = int(a("expert_count", 0))
        if hp.n_expert:
            hp.n_expert_used = int(a("expert_used_count"))
            hp.gating = int(a("expert_gating_func", 1))
            hp.norm_weights = bool(a("expert_weights_norm", arch not in LAYER_LISTED))
            hp.weights_scale = float(a("expert_weights_scale", 1.0) or 1.0)
            hp.n_group, hp.n_group_used = int(a("expert_group_count", 0)), int(a("expert_group_used_count", 0))
            hp.n_dense_lead = int(a("leading_dense_block_count", 0))
        if arch == "deepseek2":  # the heads' sizes: *_mla keys (key/value_length: the cached row)
            hp.kv_lora_rank, hp.qk_rope = int(a("attention.kv_lora_rank")), hp.n_rot
            hp.qk_nope = int(a("attention.key_length_mla", head_dim)) - hp.qk_rope
            hp.v_head_dim = int(a("attention.value_length_mla", a("attention.value_length")))
        if arch == "gpt-oss":
            hp.window = int(a("attention.sliding_window"))
            hp.swa = [il % 2 == 0 for il in range(n_layer)]
        self.add_bos = bool(_field(r, "tokenizer.ggml.add_bos_token",
                                   _field(r, "tokenizer.ggml.model") == "llama"))
        self.bos_id = _field(r, "tokenizer.ggml.bos_token_id")
        self.eos_id = _field(r, "tokenizer.ggml.eos_token_id")
        if verbose:
            print(f"[ref] {path}: {self.hp}", file=sys.stderr)

        if a("rope.scaling.type") == "yarn":
            yarn_factor = factor
            hp.rope_scale = 1.0  # the interpolation is in the frequencies
            if not local_rope:
                hp.rope_scale_swa = 1.0
            log_mul = float(a("rope.scaling.yarn_log_multiplier", 0.0)) / 0.1  # DeepSeek's mscale_all_dim
            if arch == "deepseek2" and log_mul:
                m = hp.attn_factor * yarn_mscale(factor, log_mul)
                hp.kq_scale = m * m / np.sqrt(hp.qk_nope + hp.qk_rope)
            else:
                hp.attn_factor *= yarn_mscale(factor)
                if not local_rope:
                    hp.attn_factor_swa = hp.attn_factor
                if arch == "deepseek2":
                    hp.kq_scale = hp.attn_factor ** 2 / np.sqrt(hp.qk_nope + hp.qk_rope)
        else:
            yarn_factor = 0.0
            if arch == "deepseek2":
                hp.kq_scale = 1.0 / np.sqrt(hp.qk_nope + hp.qk_rope)

        W = self._w
        self.tok_embd = W("token_embd.weight")
        self.out_norm = W("output_norm.weight")
        self.output = W("output.weight") if "output.weight" in self.tensors else self.tok_embd
        q, kv = n_head * head_dim, n_head_kv * head_dim
        self.layers = []
        for il in range(n_layer):
            p = f"blk.{il}."
            if arch in LAYER_LISTED:
                L = {name[len(p):].replace(".weight", "").replace(".bias", "_b"): W(name)
                     for name in self.tensors if name.startswith(p)}
                if "post_attention_norm" in L:  # gpt-oss's norm before the feed-forward
                    L["ffn_norm"] = L.pop("post_attention_norm")
                self.layers.append(L)
                continue
            L = {k: W(p + k + ".weight") for k in ("attn_norm", "attn_output", "ffn_norm") }
            if p + "attn_qkv.weight" in self.tensors:
                qkv = W(p + "attn_qkv.weight")
                L["attn_q"], L["attn_k"], L["attn_v"] = qkv[:q], qkv[q:q + kv], qkv[q + kv:]
            else:
                L.update({k: W(p + k + ".weight") for k in ("attn_q", "attn_k", "attn_v")})
            for opt in ("attn_q_norm", "attn_k_norm", "post_attention_norm", "post_ffw_norm", "ffn_gate_inp",
                        "ffn_gate_exps", "ffn_up_exps", "ffn_down_exps", "ffn_gate_shexp", "ffn_up_shexp",
                        "ffn_down_shexp", "ffn_gate", "ffn_up", "ffn_down"):
                if p + opt + ".weight" in self.tensors:
                    L[opt] = W(p + opt + ".weight")
            if "ffn_up" in L and "ffn_gate" not in L and "ffn_gate_inp" not in L:  # phi3: gate rows, then up
                L["ffn_gate"], L["ffn_up"] = np.split(L["ffn_up"], 2)
            for b in ("attn_q", "attn_k", "attn_v", "attn_output"):
                if p + b + ".bias" in self.tensors:
                    L[b + "_b"] = W(p + b + ".bias")
            self.layers.append(L)
        # RoPE inverse frequencies per layer kind, float64
        n_ctx = n_ctx or hp.n_ctx_train
        i = np.arange(0, hp.n_rot, 2, dtype=np.float64)
        factors = np.ones(hp.n_rot // 2)
        if "rope_freqs.weight" in self.tensors:
            factors = W("rope_freqs.weight").astype(np.float64)
        elif "rope_factors_long.weight" in self.tensors:
            which = "long" if n_ctx > hp.n_ctx_orig else "short"
            factors = W(f"rope_factors_{which}.weight").astype(np.float64)
        self.inv_freq = hp.rope_base ** (-i / hp.n_rot) / factors
        self.inv_freq_swa = hp.rope_base_swa ** (-i / hp.n_rot) / factors
        if yarn_factor:
            self.inv_freq = yarn_inv_freq(hp.n_rot, hp.rope_base, yarn_factor, hp.n_ctx_orig,
                                          float(a("rope.scaling.yarn_beta_fast", 32.0)), float(a("rope.scaling.yarn_beta_slow", 1.0)))
            if not local_rope:
                self.inv_freq_swa = self.inv_freq

    # -- weights ---------------------------------------------------------------
    def _w(self, name: str) -> np.ndarray:
        t = self.tensors[name]
        arr = dequantize(t.data, t.tensor_type)
        shape = tuple(int(x) for x in reversed(t.shape.tolist()))  # (ne1, ne0) row-major
        return np.ascontiguousarray(arr.reshape(shape), dtype=self.dtype)

    # -- ops -------------------------------------------------------------------
    def _rms(self, x: np.ndarray, w: np.ndarray) -> np.ndarray:
        x64 = x.astype(np.float64, copy=False)
        r = 1.0 / np.sqrt(np.mean(x64 * x64, axis=-1, keepdims=True) + self.hp.rms_eps)
        return (x64 * r).astype(self.dtype, copy=False) * w

    def _rope(self, x: np.ndarray, pos: np.ndarray, swa: bool) -> np.ndarray:
        """x: (n, heads, head_dim); pos: (n,) int positions."""
        hp = self.hp
        inv, scale, mag = ((self.inv_freq_swa, hp.rope_scale_swa, hp.attn_factor_swa) if swa
                           else (self.inv_freq, hp.rope_scale, hp.attn_factor))
        ang = (pos.astype(np.float64) * scale)[:, None] * inv[None, :]  # (n, n_rot/2)
        cos = (np.cos(ang) * mag)[:, None, :].astype(self.dtype)
        sin = (np.sin(ang) * mag)[:, None, :].astype(self.dtype)
        out = x.copy()
        if hp.rope_neox:
            h = hp.n_rot // 2
            x0, x1 = x[..., :h], x[..., h:hp.n_rot]
            out[..., :h] = x0 * cos - x1 * sin
            out[..., h:hp.n_rot] = x0 * sin + x1 * cos
        else:
            x0, x1 = x[..., 0:hp.n_rot:2], x[..., 1:hp.n_rot:2]
            out[..., 0:hp.n_rot:2] = x0 * cos - x1 * sin
            out[..., 1:hp.n_rot:2] = x0 * sin + x1 * cos
        return out

    @staticmethod
    def _softmax(x: np.ndarray, axis=-1) -> np.ndarray:
        m = np.max(x, axis=axis, keepdims=True)
        e = np.exp(x - m)
        return e / np.sum(e, axis=axis, keepdims=True)

    def _glu(self, h, gate, up, down):
        gt = h @ gate.T
        if self.hp.arch in GEMMA:  # GELU, tanh approximation
            act = 0.5 * gt * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (gt + 0.044715 * gt ** 3)))
        else:
            act = gt / (1.0 + np.exp(-gt))
        return (act * (h @ up.T)) @ down.T

    def _moe(self, h, L):
        chosen, weights, gaps = route(self, L, h)
        out = np.zeros_like(h)
        self.router_gaps = getattr(self, "router_gaps", []) + [float(g) for g in gaps]
        for t in range(h.shape[0]):
            for e, we in zip(chosen[t], weights[t]):
                if self.hp.arch == "gpt-oss":
                    out[t] += we * oss_expert(L, e, h[t:t + 1])[0]
                else:
                    out[t] += we * self._glu(h[t:t + 1], L["ffn_gate_exps"][e], L["ffn_up_exps"][e], L["ffn_down_exps"][e])[0]
        if "ffn_up_shexp" in L:
            out = out + self._glu(h, L["ffn_gate_shexp"], L["ffn_up_shexp"], L["ffn_down_shexp"])
        return out

    # -- forward ---------------------------------------------------------------
    def new_cache(self) -> KVCache:
        return KVCache(self.hp.n_layer)

    def forward(self, ids, cache: KVCache | None = None, last_only: bool = False) -> np.ndarray:
        """Run `ids` at positions cache.n .. cache.n+len-1 (0.. without a cache).

        Returns float64 logits, (len(ids), n_vocab), or (1, n_vocab) if last_only.
        """
        logits = (self.hidden(ids, cache, last_only) @ self.output.T).astype(np.float64)
        if self.hp.final_softcap:
            logits = self.hp.final_softcap * np.tanh(logits / self.hp.final_softcap)
        return logits

    def hidden(self, ids, cache: KVCache | None = None, last_only: bool = False) -> np.ndarray:
        """The final hidden states of `ids` after the output norm (what llama.cpp pools into
        embeddings): (len(ids), n_embd), or (1, n_embd) if last_only."""
        hp = self.hp
        ids = np.asarray(ids, dtype=np.int64)
        n = len(ids)
        if cache is None:
            cache = self.new_cache()
        p0 = cache.n
        pos = np.arange(p0, p0 + n)
        T = p0 + n
        g = hp.n_head // hp.n_head_kv
        hd = hp.head_dim
        # causal mask (n, T): query i (abs pos p0+i) sees keys 0..p0+i; in a window, the last `window`
        keys = np.arange(T)[None, :]
        causal = keys <= pos[:, None]
        mask = np.where(causal, 0.0, -np.inf).astype(self.dtype)
        mask_swa = np.where(causal & (pos[:, None] - keys < max(hp.window, 1)), 0.0, -np.inf).astype(self.dtype)

        x = self.tok_embd[ids]  # (n, n_embd)
        if hp.arch in GEMMA:
            x = x * np.sqrt(hp.n_embd)
        for il, L in enumerate(self.layers):
            swa = hp.swa[il] and hp.window > 0
            h = self._rms(x, L["attn_norm"])
            if hp.arch == "deepseek2":
                x = x + mla_attention(self, L, h, pos, cache, il, mask)
                h = self._rms(x, L["ffn_norm"])
                x = x + (self._moe(h, L) if il >= hp.n_dense_lead else self._glu(h, L["ffn_gate"], L["ffn_up"], L["ffn_down"]))
                continue
            q = h @ L["attn_q"].T
            k = h @ L["attn_k"].T
            v = h @ L["attn_v"].T
            if "attn_q_b" in L:
                q = q + L["attn_q_b"]
                k = k + L["attn_k_b"]
                v = v + L["attn_v_b"]
            q = q.reshape(n, hp.n_head, hd)
            k = k.reshape(n, hp.n_head_kv, hd)
            if "attn_q_norm" in L:
                q = self._rms(q, L["attn_q_norm"])
                k = self._rms(k, L["attn_k_norm"])
            q = self._rope(q, pos, swa)
            k = self._rope(k, pos, swa)
            v = v.reshape(n, hp.n_head_kv, hd)
            K, V = cache.append(il, k, v)  # (T, n_kv, hd)
            qh = q.reshape(n, hp.n_head_kv, g, hd).transpose(1, 2, 0, 3)   # (kv, g, n, hd)
            kh = K.transpose(1, 2, 0)[:, None]                              # (kv, 1, hd, T)
            vh = V.transpose(1, 0, 2)[:, None]                              # (kv, 1, T, hd)
            s = (qh @ kh) * hp.kq_scale                                     # (kv, g, n, T)
            if hp.attn_softcap:
                s = hp.attn_softcap * np.tanh(s / hp.attn_softcap)
            s = s + (mask_swa if swa else mask)
            o = (sink_softmax(s, L["attn_sinks"]) if "attn_sinks" in L else self._softmax(s)) @ vh  # (kv, g, n, hd)
            o = o.transpose(2, 0, 1, 3).reshape(n, hp.n_head * hd)
            o = o @ L["attn_output"].T
            if "attn_output_b" in L:
                o = o + L["attn_output_b"]
            if "post_attention_norm" in L:
                o = self._rms(o, L["post_attention_norm"])
            x = x + o
            h = self._rms(x, L["ffn_norm"])
            if "ffn_gate_inp" in L:
                f = self._moe(h, L)
            else:
                f = self._glu(h, L["ffn_gate"], L["ffn_up"], L["ffn_down"])
            if "post_ffw_norm" in L:
                f = self._rms(f, L["post_ffw_norm"])
            x = x + f
        cache.n = T
        if last_only:
            x = x[-1:]
        return self._rms(x, self.out_norm)

    def greedy(self, prompt_ids, n: int, stop_at_eos: bool = False, margins: list | None = None):
        """Greedy continuation of n tokens (KV-cached). Appends top-2 margins to `margins`."""
        cache = self.new_cache()
        logits = self.forward(prompt_ids, cache, last_only=True)[-1]
        out = []
        for _ in range(n):
            top2 = np.argpartition(-logits, 2)[:2]
            nxt = int(np.argmax(logits))
            if margins is not None:
                a, b = sorted(logits[top2], reverse=True)
                margins.append(float(a - b))
            out.append(nxt)
            if stop_at_eos and nxt == self.eos_id:
                break
            logits = self.forward([nxt], cache, last_only=True)[-1]
        return out


def log_softmax(logits: np.ndarray) -> np.ndarray:
    l = logits.astype(np.float64)
    m = np.max(l, axis=-1, keepdims=True)
    return l - m - np.log(np.sum(np.exp(l - m), axis=-1, keepdims=True))


def top2_margin(logits: np.ndarray) -> np.ndarray:
    """logits (n, V) -> top1 - top2 logit per row."""
    part = -np.partition(-logits, 1, axis=-1)[:, :2]
    return part[:, 0] - part[:, 1]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--ids", type=int, nargs="+", required=True)
    ap.add_argument("--greedy", type=int, default=0, help="generate this many tokens greedily")
    ap.add_argument("--fp32", action="store_true", help="compute in float32 instead of float64")
    args = ap.parse_args()
    m = RefModel(args.model, dtype=np.float32 if args.fp32 else np.float64, verbose=True)
    if args.greedy:
        print(m.greedy(args.ids, args.greedy))
    else:
        lg = m.forward(args.ids, last_only=True)[-1]
        top = np.argsort(-lg)[:5]
        print([(int(t), float(lg[t])) for t in top])


if __name__ == "__main__":
    main()
