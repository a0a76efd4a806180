#!/usr/bin/env python3
"""Write tests/fixtures/model/smollm2_embeddings.json from the numpy reference: embeddings of
SmolLM2-135M-Instruct as llama.cpp's server computes them (the final hidden states after the
output norm, pooled by the last token or by their mean, then scaled to unit length).

The inputs are token ids from tests/fixtures/tokenizer_ids_smollm2.jsonl (llama.cpp's
tokenization of the tokenizer corpus): one short text, one of several blocks of the KV
cache, and one longer than a forward pass of Strata's (256 tokens), so that pooling over
several passes is covered.

    nice python3 tests/reference/make_embedding_fixtures.py \\
        --smollm2 ~/.cache/strata/models/SmolLM2-135M-Instruct.Q4_1.gguf -o tests/fixtures/model
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from reference_forward import RefModel  # noqa: E402

HERE = os.path.dirname(__file__)


def corpus_ids() -> list[list[int]]:
    rows = []
    with open(os.path.join(HERE, "..", "fixtures", "tokenizer_ids_smollm2.jsonl")) as f:
        for line in f:
            row = json.loads(line)
            if "plain" in row and row["plain"]:
                rows.append(row["plain"])
    return rows


def inputs() -> list[list[int]]:
    rows = corpus_ids()
    short = rows[1]
    medium = [t for r in rows[1:6] for t in r]
    long = []
    for r in rows:
        long += r
        if len(long) >= 300:
            break
    return [short, medium, long[:300]]


def unit(v: np.ndarray) -> list[float]:
    return (v / np.linalg.norm(v)).tolist()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--smollm2", required=True)
    ap.add_argument("-o", "--out", required=True)
    a = ap.parse_args()
    m = RefModel(a.smollm2)
    cases = []
    for ids in inputs():
        h = m.hidden(ids)
        cases.append({"ids": ids, "last": unit(h[-1]), "mean": unit(h.mean(axis=0)), "first": unit(h[0])})
        print(f"{len(ids)} tokens done", file=sys.stderr)
    out = {"_meta": {"model": os.path.basename(a.smollm2), "made_by": "tests/reference/make_embedding_fixtures.py",
                     "what": "unit-length pooled final hidden states (after output_norm), float64 reference"},
           "cases": cases}
    with open(os.path.join(a.out, "smollm2_embeddings.json"), "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
