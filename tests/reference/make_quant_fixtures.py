#!/usr/bin/env python3
"""Quantization fixtures for tests/unit/cpu/test_quant.cpp: an oracle for the scalar dequantizers
in cpu/quant_ref.cpp that shares no code with them.

For each type it writes, under tests/fixtures/quant/:
  <type>.bin  raw GGUF/ggml blocks: random bytes, with every f16/f32 scale field overwritten by a
              sane finite value (sign random, magnitude log-uniform in [1e-3, 1]) so the output
              has no inf/NaN;
  <type>.f32  the same values dequantized by gguf-py (gguf.quants.dequantize), little-endian float32.
Q8_K is ggml-internal and gguf-py cannot dequantize it, so its output is computed here with numpy
from the documented layout (float d, int8 qs[256], int16 bsums[16]; x = d * q).

Covers F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K, Q8_K, Q2_K, Q3_K, IQ4_NL,
IQ4_XS and MXFP4 (its e8m0 exponent byte drawn from 100..140, scales 2^-28..2^12, plus the
subnormal exponents 0 and 1 and a large one, 250, in three blocks). Deterministic (fixed seed); about 160 KB in all. Regenerate with:
    pip install gguf numpy
    python3 tests/reference/make_quant_fixtures.py
"""
from pathlib import Path

import numpy as np
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType as T
from gguf.quants import dequantize, quantize

OUT = Path(__file__).resolve().parent.parent / "fixtures" / "quant"
rng = np.random.default_rng(20240601)

# type -> byte offsets of its f16 scale fields within a block
F16_SCALES = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
}
# drawn after Q8_K, so the fixtures above stay as they were
F16_SCALES_LOW_BIT = {T.Q2_K: [80, 82], T.Q3_K: [108], T.IQ4_NL: [0], T.IQ4_XS: [0]}
N_VALUES = 2048  # per type: 64 blocks of 32, or 8 super-blocks of 256


def scales(n: int) -> np.ndarray:
    mag = 10.0 ** rng.uniform(-3.0, 0.0, n)
    return (mag * rng.choice([-1.0, 1.0], n)).astype(np.float32)


def write(name: str, raw: np.ndarray, values: np.ndarray) -> None:
    values = np.ascontiguousarray(values, dtype="<f4").reshape(-1)
    assert np.all(np.isfinite(values)), name
    (OUT / f"{name}.bin").write_bytes(raw.astype(np.uint8).tobytes())
    (OUT / f"{name}.f32").write_bytes(values.tobytes())
    print(f"{name:5s} {raw.size:6d} bytes -> {values.size} floats")


def write_blocks(types: dict) -> None:
    """Random blocks of each type, its f16 scale fields (byte offsets) set to sane values."""
    for qtype, offsets in types.items():
        block_elems, block_bytes = GGML_QUANT_SIZES[qtype]
        n_blocks = N_VALUES // block_elems
        raw = rng.integers(0, 256, size=(n_blocks, block_bytes), dtype=np.uint8)
        for off in offsets:
            raw[:, off:off + 2] = scales(n_blocks).astype(np.float16).view(np.uint8).reshape(n_blocks, 2)
        write(qtype.name.lower(), raw, dequantize(raw, qtype))


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)

    # Plain float types: the raw bytes come from random floats.
    x = rng.standard_normal(N_VALUES).astype(np.float32)
    write("f32", x.view(np.uint8), dequantize(x.view(np.uint8), T.F32))
    h = x.astype(np.float16).view(np.uint8)
    write("f16", h, dequantize(h, T.F16))
    b = quantize(x, T.BF16).reshape(-1)
    write("bf16", b, dequantize(b, T.BF16))

    write_blocks(F16_SCALES)

    # Q8_K by hand (see above): 4-byte float d, 256 int8, 16 int16 sums of each 16 values.
    n_blocks = N_VALUES // 256
    d = scales(n_blocks)
    qs = rng.integers(-128, 128, size=(n_blocks, 256), dtype=np.int8)
    bsums = qs.reshape(n_blocks, 16, 16).astype(np.int16).sum(axis=-1, dtype=np.int16)
    raw = np.concatenate([d.view(np.uint8).reshape(n_blocks, 4), qs.view(np.uint8),
                          bsums.astype("<i2").view(np.uint8).reshape(n_blocks, 32)], axis=1)
    assert raw.shape[1] == 292
    write("q8_k", raw, d[:, None] * qs.astype(np.float32))

    write_blocks(F16_SCALES_LOW_BIT)

    # MXFP4: random nibbles; the exponent byte (offset 0) in a range whose values stay finite,
    # and the edge cases of ggml's e8m0 half-scale: subnormal (e < 2) and a large one (2^122).
    block_elems, block_bytes = GGML_QUANT_SIZES[T.MXFP4]
    n_blocks = N_VALUES // block_elems
    raw = rng.integers(0, 256, size=(n_blocks, block_bytes), dtype=np.uint8)
    raw[:, 0] = rng.integers(100, 141, size=n_blocks, dtype=np.uint8)
    raw[:3, 0] = [0, 1, 250]
    write("mxfp4", raw, dequantize(raw, T.MXFP4))


if __name__ == "__main__":
    main()
