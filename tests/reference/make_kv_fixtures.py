#!/usr/bin/env python3
"""KV cache quantization fixtures for tests/unit/cpu/test_attention_cpu.cpp: the bytes gguf-py's
quantizer (gguf.quants.quantize, a port of ggml's quantize_row_*_ref that shares no code with
cpu/kv_format.cpp) writes for rows of normal floats.

For each block-quantized KV type it writes, under tests/fixtures/kv/:
  <type>.in.f32  the input: 8 rows of 256 float32 (one row has an all-zero block, one a block
                 whose largest magnitude is positive, so both signs of the Q4_0 scale occur);
  <type>.bin     gguf-py's blocks for those rows.

Deterministic (fixed seed); about 30 KB in all. Regenerate with:
    pip install gguf numpy
    python3 tests/reference/make_kv_fixtures.py
"""
from pathlib import Path

import numpy as np
from gguf.constants import GGMLQuantizationType as T
from gguf.quants import quantize

OUT = Path(__file__).resolve().parent.parent / "fixtures" / "kv"
ROWS, N = 8, 256


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(20261125)
    x = (rng.standard_normal((ROWS, N)) * 3.0).astype(np.float32)
    x[1, 32:64] = 0.0
    x[2, 64:96] = np.abs(x[2, 64:96])
    for qtype in (T.Q8_0, T.Q4_0):
        name = qtype.name.lower()
        (OUT / f"{name}.in.f32").write_bytes(x.astype("<f4").tobytes())
        (OUT / f"{name}.bin").write_bytes(quantize(x, qtype).astype(np.uint8).tobytes())
        print(f"{name}: {ROWS} rows of {N}")


if __name__ == "__main__":
    main()
