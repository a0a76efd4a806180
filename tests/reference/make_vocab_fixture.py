#!/usr/bin/env python3
"""Writes tests/fixtures/tokenizer_vocab_stories260k.json: stories260K's header and vocabulary
(tokens, scores, token types; no weights), read from the file with the gguf package. The test
suite writes a stand-in model from it where stories260K itself is absent (a clone without the
shared folder): stories260K's shape, header and SentencePiece vocabulary with random weights, so
the tokenizer, grammar, scheduler and CLI tests run everywhere (tests/support/model_paths.h).

    python3 tests/reference/make_vocab_fixture.py PATH/TO/stories260K.gguf
"""
import importlib.metadata
import json
import pathlib
import sys

import gguf

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "fixtures" / "tokenizer_vocab_stories260k.json"


def field(reader, key):
    f = reader.fields[key]
    if f.types[0] == gguf.GGUFValueType.ARRAY:
        if f.types[1] == gguf.GGUFValueType.STRING:
            return [bytes(f.parts[i]).decode("utf-8") for i in f.data]
        return [f.parts[i].tolist()[0] for i in f.data]
    if f.types[0] == gguf.GGUFValueType.STRING:
        return bytes(f.parts[f.data[0]]).decode("utf-8")
    return f.parts[f.data[0]].tolist()[0]


def main():
    reader = gguf.GGUFReader(sys.argv[1])
    header = {k: field(reader, k) for k in reader.fields
              if k.startswith(("llama.", "tokenizer.ggml.")) and k not in
              ("tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type")}
    out = {
        "_meta": {"model": pathlib.Path(sys.argv[1]).name, "gguf": importlib.metadata.version("gguf")},
        "header": header,
        "tokens": field(reader, "tokenizer.ggml.tokens"),
        "scores": field(reader, "tokenizer.ggml.scores"),
        "token_type": field(reader, "tokenizer.ggml.token_type"),
    }
    OUT.write_text(json.dumps(out, ensure_ascii=False, indent=0) + "\n")
    print(f"wrote {OUT} ({len(out['tokens'])} tokens)")


if __name__ == "__main__":
    main()
