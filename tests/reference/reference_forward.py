#!/usr/bin/env python3
"""Independent numpy reference forward pass for GGUF llama / qwen2 models.

This is a test oracle, written from the model definitions rather than from
Strata's C++ code: it reads a GGUF with `gguf.GGUFReader`, dequantizes every
weight with `gguf.quants.dequantize` and runs a plain dense forward pass in
float64 (the default; `dtype=np.float32` is available for speed).  It is slow
and simple on purpose.

Conventions (llama.cpp's, which GGUF files follow):
  * A GGUF tensor with ne = [ne0, ne1] is a row-major numpy array of shape
    (ne1, ne0); a linear layer is y = x @ W.T  (ne0 = input features).
  * arch `llama`: RoPE in llama.cpp's "normal" mode: adjacent pairs
    (x[2i], x[2i+1]) rotate by pos * base^(-2i/n_rot).  The HF->GGUF
    converter permutes Q/K rows so this is right for HF-trained llamas too.
  * arch `qwen2`: RoPE in NeoX mode: pairs (x[i], x[i + n_rot/2]); Q/K/V have
    biases (`attn_{q,k,v}.bias`).
  * Only the first n_rot (`<arch>.rope.dimension_count`, default head_dim)
    dims of each head rotate.  Base `<arch>.rope.freq_base` (default 10000).
    Linear rope scaling (`<arch>.rope.scaling.type == "linear"`) and llama-3
    style `rope_freqs.weight` frequency factors are honoured.
  * GQA: query head h uses kv head h // (n_head / n_head_kv).
  * RMSNorm: x / sqrt(mean(x^2) + eps) * w, eps from
    `<arch>.attention.layer_norm_rms_epsilon`.
  * FFN: down(silu(gate(x)) * up(x)).
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
from dataclasses import dataclass

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize


def _field(reader: GGUFReader, key: str, default=None):
    f = reader.fields.get(key)
    if f is None:
        return default
    v = f.contents()
    return v


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


SUPPORTED_ARCHS = {"llama": False, "mistral": False, "qwen2": True}  # arch -> rope neox


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
    def __init__(self, path: str, dtype=np.float64, verbose: bool = False):
        self.path = path
        self.dtype = dtype
        r = GGUFReader(path)
        arch = _field(r, "general.architecture")
        if arch not in SUPPORTED_ARCHS:
            raise ValueError(f"unsupported architecture {arch!r} (supported: {sorted(SUPPORTED_ARCHS)})")
        self.tensors = {t.name: t for t in r.tensors}

        def a(key, default=None):
            return _field(r, f"{arch}.{key}", default)

        n_embd = int(a("embedding_length"))
        n_head = int(a("attention.head_count"))
        n_head_kv = int(a("attention.head_count_kv", n_head))
        head_dim = int(a("attention.key_length", n_embd // n_head))
        tok = self.tensors["token_embd.weight"]
        n_vocab = int(tok.shape[1])  # ne1
        scale = 1.0
        if a("rope.scaling.type") == "linear" and a("rope.scaling.factor"):
            scale = 1.0 / float(a("rope.scaling.factor"))
        self.hp = Hparams(
            arch=arch,
            n_layer=int(a("block_count")),
            n_embd=n_embd,
            n_head=n_head,
            n_head_kv=n_head_kv,
            head_dim=head_dim,
            n_ff=int(a("feed_forward_length")),
            n_vocab=n_vocab,
            n_rot=int(a("rope.dimension_count", head_dim)),
            rope_base=float(a("rope.freq_base", 10000.0)),
            rope_scale=scale,
            rope_neox=SUPPORTED_ARCHS[arch],
            rms_eps=float(a("attention.layer_norm_rms_epsilon", 1e-5)),
            n_ctx_train=int(a("context_length", 0)),
        )
        self.add_bos = bool(_field(r, "tokenizer.ggml.add_bos_token",
                                   _field(r, "tokenizer.ggml.model") == "llama"))
        self.bos_id = _field(r, "tokenizer.ggml.bos_token_id")
        self.eos_id = _field(r, "tokenizer.ggml.eos_token_id")
        if verbose:
            print(f"[ref] {path}: {self.hp}", file=sys.stderr)

        W = self._w
        self.tok_embd = W("token_embd.weight")
        self.out_norm = W("output_norm.weight")
        self.output = W("output.weight") if "output.weight" in self.tensors else self.tok_embd
        self.layers = []
        for il in range(self.hp.n_layer):
            p = f"blk.{il}."
            L = {k: W(p + k + ".weight") for k in
                 ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
                  "ffn_norm", "ffn_gate", "ffn_up", "ffn_down")}
            for b in ("attn_q", "attn_k", "attn_v", "attn_output"):
                if p + b + ".bias" in self.tensors:
                    L[b + "_b"] = W(p + b + ".bias")
            self.layers.append(L)
        # RoPE inverse frequencies, float64
        i = np.arange(0, self.hp.n_rot, 2, dtype=np.float64)
        inv = self.hp.rope_base ** (-i / self.hp.n_rot)
        if "rope_freqs.weight" in self.tensors:
            inv = inv / W("rope_freqs.weight").astype(np.float64)
        self.inv_freq = inv

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

    def _rope(self, x: np.ndarray, pos: np.ndarray) -> np.ndarray:
        """x: (n, heads, head_dim); pos: (n,) int positions."""
        hp = self.hp
        ang = (pos.astype(np.float64) * hp.rope_scale)[:, None] * self.inv_freq[None, :]  # (n, n_rot/2)
        cos = np.cos(ang)[:, None, :].astype(self.dtype)
        sin = np.sin(ang)[:, None, :].astype(self.dtype)
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

    # -- forward ---------------------------------------------------------------
    def new_cache(self) -> KVCache:
        return KVCache(self.hp.n_layer)

    def forward(self, ids, cache: KVCache | None = None, last_only: bool = False) -> np.ndarray:
        """Run `ids` at positions cache.n .. cache.n+len-1 (0.. without a cache).

        Returns float64 logits, (len(ids), n_vocab), or (1, n_vocab) if last_only.
        """
        return (self.hidden(ids, cache, last_only) @ self.output.T).astype(np.float64)

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
        kq_scale = 1.0 / np.sqrt(hd)
        # causal mask (n, T): query i (abs pos p0+i) sees keys 0..p0+i
        mask = np.where(np.arange(T)[None, :] <= pos[:, None], 0.0, -np.inf).astype(self.dtype)

        x = self.tok_embd[ids]  # (n, n_embd)
        for il, L in enumerate(self.layers):
            h = self._rms(x, L["attn_norm"])
            q = h @ L["attn_q"].T
            k = h @ L["attn_k"].T
            v = h @ L["attn_v"].T
            if "attn_q_b" in L:
                q = q + L["attn_q_b"]
                k = k + L["attn_k_b"]
                v = v + L["attn_v_b"]
            q = self._rope(q.reshape(n, hp.n_head, hd), pos)
            k = self._rope(k.reshape(n, hp.n_head_kv, hd), pos)
            v = v.reshape(n, hp.n_head_kv, hd)
            K, V = cache.append(il, k, v)  # (T, n_kv, hd)
            qh = q.reshape(n, hp.n_head_kv, g, hd).transpose(1, 2, 0, 3)   # (kv, g, n, hd)
            kh = K.transpose(1, 2, 0)[:, None]                              # (kv, 1, hd, T)
            vh = V.transpose(1, 0, 2)[:, None]                              # (kv, 1, T, hd)
            s = (qh @ kh) * kq_scale + mask                                 # (kv, g, n, T)
            o = self._softmax(s) @ vh                                       # (kv, g, n, hd)
            o = o.transpose(2, 0, 1, 3).reshape(n, hp.n_head * hd)
            o = o @ L["attn_output"].T
            if "attn_output_b" in L:
                o = o + L["attn_output_b"]
            x = x + o
            h = self._rms(x, L["ffn_norm"])
            gt = h @ L["ffn_gate"].T
            up = h @ L["ffn_up"].T
            act = gt / (1.0 + np.exp(-gt)) * up
            x = x + act @ L["ffn_down"].T
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
