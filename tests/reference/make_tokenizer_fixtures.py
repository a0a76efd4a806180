#!/usr/bin/env python3
"""Writes the tokenizer fixtures: the ids llama.cpp (through llama-cpp-python) gives for every
string of tests/fixtures/tokenizer_corpus.jsonl.

    pip install llama-cpp-python gguf
    python3 tests/reference/make_tokenizer_fixtures.py [--smollm PATH] [--stories PATH]

Outputs, next to the corpus:
  tokenizer_ids_smollm2.jsonl      SmolLM2-135M-Instruct (byte-level BPE, pre "smollm")
  tokenizer_ids_stories260k.jsonl  stories260K (SentencePiece)
  tokenizer_ids_smollm2_pre.jsonl  SmolLM2's vocabulary with tokenizer.ggml.pre switched to
                                   llama-bpe, qwen2, gpt-2 and default, to check those
                                   pre-tokenizers too (the test writes the same variants)
Each line: {"id": corpus id, "plain": ids with parse_special=False, "special": ids with
parse_special=True}, both with add_special=True (BOS/EOS as the model's metadata says). The
first line is {"_meta": {...}} naming the model and the llama-cpp-python version.
"""
import argparse
import json
import os
import pathlib
import tempfile

import gguf
import llama_cpp
from llama_cpp import Llama

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
PRE_VARIANTS = ["llama-bpe", "qwen2", "gpt-2", "default"]


def default_smollm() -> pathlib.Path:
    # Same search order as runtime/model_paths.cpp.
    if os.environ.get("STRATA_MODELS"):
        base = pathlib.Path(os.environ["STRATA_MODELS"])
    elif os.environ.get("XDG_CACHE_HOME"):
        base = pathlib.Path(os.environ["XDG_CACHE_HOME"]) / "strata" / "models"
    else:
        base = pathlib.Path.home() / ".cache" / "strata" / "models"
    return base / "SmolLM2-135M-Instruct.Q4_1.gguf"


def load_corpus():
    entries = []
    with open(FIXTURES / "tokenizer_corpus.jsonl", encoding="utf-8") as f:
        for line in f:
            e = json.loads(line)
            data = bytes.fromhex(e["hex"]) if "hex" in e else e["text"].encode("utf-8")
            entries.append((e["id"], data))
    return entries


def tokenize_all(model_path: pathlib.Path, corpus):
    llm = Llama(model_path=str(model_path), vocab_only=True, verbose=False)
    rows = []
    for cid, data in corpus:
        rows.append({"id": cid,
                     "plain": llm.tokenize(data, add_bos=True, special=False),
                     "special": llm.tokenize(data, add_bos=True, special=True)})
    return rows


def write(path: pathlib.Path, meta: dict, rows) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps({"_meta": meta}) + "\n")
        for r in rows:
            f.write(json.dumps(r, separators=(",", ":")) + "\n")
    print(f"wrote {path} ({len(rows)} rows)")


def write_pre_variant(src: pathlib.Path, dst: pathlib.Path, pre: str) -> None:
    """Copies every metadata key of `src` (no tensors) with tokenizer.ggml.pre set to `pre`."""
    r = gguf.GGUFReader(str(src))
    fields = r.fields
    arch = bytes(fields["general.architecture"].parts[-1]).decode()
    w = gguf.GGUFWriter(str(dst), arch)
    T = gguf.GGUFValueType
    for key, fld in fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        t = fld.types[0]
        if key == "tokenizer.ggml.pre":
            w.add_string(key, pre)
        elif t == T.STRING:
            w.add_string(key, bytes(fld.parts[fld.data[0]]).decode())
        elif t == T.ARRAY and fld.types[-1] == T.STRING:
            w.add_array(key, [bytes(fld.parts[i]).decode("utf-8", errors="surrogateescape") for i in fld.data])
        elif t == T.ARRAY and fld.types[-1] == T.INT32:
            w.add_array(key, [int(fld.parts[i][0]) for i in fld.data])
        elif t == T.UINT32:
            w.add_uint32(key, int(fld.parts[fld.data[0]][0]))
        elif t == T.FLOAT32:
            w.add_float32(key, float(fld.parts[fld.data[0]][0]))
        elif t == T.BOOL:
            w.add_bool(key, bool(fld.parts[fld.data[0]][0]))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smollm", type=pathlib.Path, default=default_smollm())
    ap.add_argument("--stories", type=pathlib.Path, default=ROOT.parent / "shared" / "models" / "stories260K.gguf")
    args = ap.parse_args()

    corpus = load_corpus()
    version = llama_cpp.__version__
    write(FIXTURES / "tokenizer_ids_stories260k.jsonl",
          {"model": "stories260K.gguf", "llama_cpp_python": version, "add_special": True},
          tokenize_all(args.stories, corpus))
    write(FIXTURES / "tokenizer_ids_smollm2.jsonl",
          {"model": args.smollm.name, "llama_cpp_python": version, "add_special": True},
          tokenize_all(args.smollm, corpus))

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for pre in PRE_VARIANTS:
            variant = pathlib.Path(tmp) / f"smollm2_{pre}.gguf"
            write_pre_variant(args.smollm, variant, pre)
            for r in tokenize_all(variant, corpus):
                rows.append({"pre": pre, **r})
    write(FIXTURES / "tokenizer_ids_smollm2_pre.jsonl",
          {"model": args.smollm.name, "pre": PRE_VARIANTS, "llama_cpp_python": version, "add_special": True}, rows)


if __name__ == "__main__":
    main()
