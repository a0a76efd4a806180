#!/usr/bin/env python3
"""YaRN RoPE fixtures for tests/unit/cpu/test_norm_rope_attention.cpp: rotated vectors computed with
numpy from the YaRN paper's formulation as Hugging Face transformers implements it
(`_compute_yarn_parameters`: inverse frequencies blended between interpolation and extrapolation
by a linear ramp over the correction range, cos and sin times the attention factor; the numpy
reference's reference_blocks.py), sharing no code with cpu/norm_rope_act.cpp.

Writes tests/fixtures/rope/yarn.json: per case the rope settings, the ramp's ends, one input head
and the head rotated at each position. Cases: DeepSeek-V2-Lite's rope part (64 dims, adjacent
pairs, factor 40, magnitude 1), gpt-oss's heads (64 dims, split halves, base 150000, factor 32,
magnitude 0.1 ln 32 + 1) and a partial rotation (32 of 48 dims). Deterministic. Regenerate with:
    python3 tests/reference/make_rope_fixtures.py
"""
import json
import math
from pathlib import Path

import numpy as np

from reference_blocks import yarn_inv_freq, yarn_ramp_ends

OUT = Path(__file__).resolve().parent.parent / "fixtures" / "rope" / "yarn.json"
POSITIONS = [0, 1, 7, 100, 4095, 4096, 60000, 131071]


def rotate(x, pos, inv_freq, n_rot, neox, magnitude):
    y = x.astype(np.float64).copy()
    angle = pos * inv_freq
    c, s = np.cos(angle) * magnitude, np.sin(angle) * magnitude
    half = n_rot // 2
    if neox:
        a, b = x[:half].astype(np.float64), x[half:n_rot].astype(np.float64)
        y[:half], y[half:n_rot] = a * c - b * s, a * s + b * c
    else:
        a, b = x[0:n_rot:2].astype(np.float64), x[1:n_rot:2].astype(np.float64)
        y[0:n_rot:2], y[1:n_rot:2] = a * c - b * s, a * s + b * c
    return y


def main() -> None:
    rng = np.random.default_rng(20250805)
    cases = [
        dict(name="deepseek-v2-lite", head_dim=64, n_rot=64, neox=False, base=10000.0, factor=40.0, n_ctx_orig=4096,
             beta_fast=32.0, beta_slow=1.0, magnitude=1.0),
        dict(name="gpt-oss", head_dim=64, n_rot=64, neox=True, base=150000.0, factor=32.0, n_ctx_orig=4096,
             beta_fast=32.0, beta_slow=1.0, magnitude=0.1 * math.log(32.0) + 1.0),
        dict(name="partial", head_dim=48, n_rot=32, neox=True, base=500000.0, factor=8.0, n_ctx_orig=8192,
             beta_fast=16.0, beta_slow=2.0, magnitude=1.25),
    ]
    for c in cases:
        inv_freq = yarn_inv_freq(c["n_rot"], c["base"], c["factor"], c["n_ctx_orig"], c["beta_fast"], c["beta_slow"])
        low, high = yarn_ramp_ends(c["n_rot"], c["base"], c["n_ctx_orig"], c["beta_fast"], c["beta_slow"])
        x = rng.standard_normal(c["head_dim"]).astype(np.float32)
        c.update(low=low, high=high, positions=POSITIONS, x=x.tolist(),
                 want=[rotate(x, p, inv_freq, c["n_rot"], c["neox"], c["magnitude"]).tolist() for p in POSITIONS])
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"cases": cases}, indent=1) + "\n")
    print(f"{OUT}: {len(cases)} cases")


if __name__ == "__main__":
    main()
