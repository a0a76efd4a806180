"""The blocks of deepseek2 and gpt-oss for tests/reference/reference_forward.py, written from Hugging
Face transformers' modeling_deepseek_v3 / gpt_oss and DeepSeek's and OpenAI's published configs
(as llama.cpp's converter records them in GGUF), not from Strata's code.

  * YaRN (both): inverse frequencies blended between base^(-2i/d) and that over the factor, by a
    linear ramp over the pair indices whose wavelengths turn beta_fast (32) .. beta_slow (1)
    times in the original context; gpt-oss scales cos and sin by 0.1 ln(factor) + 1, DeepSeek
    (mscale == mscale_all_dim in its configs) by 1 and its attention scores by
    (0.1 mscale_all_dim ln(factor) + 1)^2 / sqrt(qk_nope + qk_rope), the converter writing
    0.1 * mscale_all_dim as `rope.scaling.yarn_log_multiplier`.
  * Latent attention (deepseek2): q = attn_q_b(norm(attn_q_a(x))) or attn_q(x), per head qk_nope
    values then qk_rope rotated ones (adjacent pairs); attn_kv_a_mqa(x) = the latent (normed by
    attn_kv_a_norm) then one RoPE part shared by every head's key; each head's k_nope and v are
    the latent through attn_k_b / attn_v_b (or the rows of attn_kv_b of older files).
  * Routing (deepseek2): softmax or sigmoid scores; a selection bias (exp_probs_b) added for the
    choice only; with groups, only the experts of the groups whose two best biased scores sum
    highest; the chosen scores normalised (expert_weights_norm) and scaled; shared experts
    always. gpt-oss: the top experts by biased logits, weighted by a softmax over theirs.
  * gpt-oss's experts: gate and up with biases, gate capped at 7, up clamped to +-7,
    gate * sigmoid(1.702 gate) * (up + 1), then down with its bias.
"""
from __future__ import annotations

import math

import numpy as np


def yarn_ramp_ends(n_rot: int, base: float, n_ctx_orig: int, beta_fast: float = 32.0, beta_slow: float = 1.0):
    """The pair indices whose wavelengths turn beta_fast (low) and beta_slow (high) times over n_ctx_orig."""
    def pair_index(turns: float) -> float:
        return n_rot * math.log(n_ctx_orig / (turns * 2 * math.pi)) / (2 * math.log(base))
    return max(math.floor(pair_index(beta_fast)), 0), min(math.ceil(pair_index(beta_slow)), n_rot - 1)


def yarn_inv_freq(n_rot: int, base: float, factor: float, n_ctx_orig: int, beta_fast: float = 32.0,
                  beta_slow: float = 1.0) -> np.ndarray:
    low, high = yarn_ramp_ends(n_rot, base, n_ctx_orig, beta_fast, beta_slow)
    if low == high:
        high += 0.001
    pos_freqs = base ** (np.arange(0, n_rot, 2, dtype=np.float64) / n_rot)
    keep = 1.0 - np.clip((np.arange(n_rot // 2, dtype=np.float64) - low) / (high - low), 0, 1)
    return (1.0 / (factor * pos_freqs)) * (1 - keep) + (1.0 / pos_freqs) * keep


def yarn_mscale(factor: float, m: float = 1.0) -> float:
    return 1.0 if factor <= 1 else 0.1 * m * math.log(factor) + 1.0


def rms(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    x64 = x.astype(np.float64, copy=False)
    return (x64 / np.sqrt(np.mean(x64 * x64, axis=-1, keepdims=True) + eps)).astype(x.dtype, copy=False) * w


def softmax(x: np.ndarray, axis=-1) -> np.ndarray:
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def mla_attention(m, L: dict, h: np.ndarray, pos: np.ndarray, cache, il: int, mask: np.ndarray) -> np.ndarray:
    """deepseek2's attention of normed hidden states h (n, n_embd); m: the RefModel."""
    hp = m.hp
    n, H, nope, rope, kvl, vh = h.shape[0], hp.n_head, hp.qk_nope, hp.qk_rope, hp.kv_lora_rank, hp.v_head_dim
    q = rms(h @ L["attn_q_a"].T, L["attn_q_a_norm"], hp.rms_eps) @ L["attn_q_b"].T if "attn_q_a" in L else h @ L["attn_q"].T
    q = q.reshape(n, H, nope + rope)
    kv = h @ L["attn_kv_a_mqa"].T
    c = rms(kv[:, :kvl], L["attn_kv_a_norm"], hp.rms_eps)                    # (n, kv_lora_rank)
    k_pe = m._rope(kv[:, None, kvl:], pos, False)                             # (n, 1, rope)
    q_pe = m._rope(q[..., nope:], pos, False)
    if "attn_k_b" in L:  # (H, kv_lora_rank, nope) and (H, v, kv_lora_rank)
        k_nope = np.einsum("nc,hcd->nhd", c, L["attn_k_b"])
        v = np.einsum("nc,hvc->nhv", c, L["attn_v_b"])
    else:
        kvb = (c @ L["attn_kv_b"].T).reshape(n, H, nope + vh)
        k_nope, v = kvb[..., :nope], kvb[..., nope:]
    k = np.concatenate([k_nope, np.broadcast_to(k_pe, (n, H, rope))], axis=-1)
    K, V = cache.append(il, k, v)                                             # (T, H, .)
    qq = np.concatenate([q[..., :nope], q_pe], axis=-1)
    s = np.einsum("nhd,thd->hnt", qq, K) * hp.kq_scale + mask                 # (H, n, T)
    o = np.einsum("hnt,thv->nhv", softmax(s), V).reshape(n, H * vh)
    return o @ L["attn_output"].T


def sink_softmax(s: np.ndarray, sinks: np.ndarray) -> np.ndarray:
    """Softmax over the last axis of s (kv, g, n, T) with head (kv*g+gi)'s sink in the denominator."""
    kv, g = s.shape[0], s.shape[1]
    sk = sinks.reshape(kv, g)[:, :, None, None]
    mx = np.maximum(np.max(s, axis=-1, keepdims=True), sk)
    e = np.exp(s - mx)
    return e / (np.sum(e, axis=-1, keepdims=True) + np.exp(sk - mx))


def route(m, L: dict, h: np.ndarray):
    """The chosen experts and their weights per token, (n, used) each, and how close each token's
    choice came to another expert (the used-th best selection score less the next; empty when
    every expert is used)."""
    hp = m.hp
    logits = h @ L["ffn_gate_inp"].T
    if "ffn_gate_inp_b" in L:
        logits = logits + L["ffn_gate_inp_b"]
    n, X, k = h.shape[0], hp.n_expert, hp.n_expert_used
    if hp.arch == "gpt-oss":  # top-k of the logits, a softmax over the chosen ones
        scores = choice = logits
    else:
        scores = softmax(logits) if hp.gating == 1 else 1.0 / (1.0 + np.exp(-logits))
        choice = scores + L["exp_probs_b_b"] if "exp_probs_b_b" in L else scores
    if hp.n_group > 1:  # keep the groups whose two best scores sum highest
        grouped = choice.reshape(n, hp.n_group, X // hp.n_group)
        top2 = -np.sort(-grouped, axis=-1)[..., :2].sum(-1)                   # (n, n_group)
        keep = np.argsort(-top2, axis=-1, kind="stable")[:, :hp.n_group_used]
        allowed = np.zeros((n, hp.n_group), bool)
        np.put_along_axis(allowed, keep, True, -1)
        choice = np.where(np.repeat(allowed, X // hp.n_group, axis=-1), choice, -np.inf)
    order = np.argsort(-choice, axis=-1, kind="stable")
    chosen = order[:, :k]
    ranked = np.take_along_axis(choice, order, -1)
    gaps = list(ranked[:, k - 1] - ranked[:, k]) if k < X else []
    w = np.take_along_axis(scores, chosen, -1)
    if hp.arch == "gpt-oss":
        return chosen, softmax(w), gaps
    if hp.norm_weights:
        w = w / w.sum(-1, keepdims=True)
    return chosen, w * hp.weights_scale, gaps


def oss_expert(L: dict, e: int, x: np.ndarray) -> np.ndarray:
    """gpt-oss expert e on rows x."""
    gate = x @ L["ffn_gate_exps"][e].T + L["ffn_gate_exps_b"][e]
    up = x @ L["ffn_up_exps"][e].T + L["ffn_up_exps_b"][e]
    gate = np.minimum(gate, 7.0)
    up = np.clip(up, -7.0, 7.0)
    return (gate / (1.0 + np.exp(-1.702 * gate)) * (up + 1.0)) @ L["ffn_down_exps"][e].T + L["ffn_down_exps_b"][e]
