#!/usr/bin/env python3
"""Writes the fuzzing seed corpus under tests/fuzz/corpus/<target>/ (small files, no weights).

gguf:          two tiny llama-shaped models, one with SmolLM2's byte-level BPE vocabulary and
               chat template and one with stories260K's SentencePiece vocabulary (both cut to
               their first few hundred tokens), as GGUF v3 and v2, and truncated at several offsets.
tokenizer:     strings from tests/fixtures/tokenizer_corpus.jsonl behind each flag byte.
chat_template: SmolLM2's template and one template of each other family, with messages.
plan:          plans written by `strata plan -o` (pass --strata BIN).
openai_request: OpenAI chat and completion bodies using each field the reader knows.
plan_request:  `POST /v1/plan` bodies (catalog shapes, the local model, each field).

Needs the `gguf` and `numpy` packages and the two models (default locations, or --bpe / --spm).
"""
import argparse
import json
import os
import subprocess
import tempfile
from pathlib import Path

import gguf
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "fuzz" / "corpus"
N_TOKENS = 300
N_EMBD = 8


def field_value(reader, name):
    f = reader.fields.get(name)
    if f is None:
        return None
    if f.types[0] == gguf.GGUFValueType.ARRAY:
        if f.types[1] == gguf.GGUFValueType.STRING:
            return [bytes(f.parts[i]).decode("utf-8", "replace") for i in f.data]
        return [f.parts[i].tolist()[0] for i in f.data]
    if f.types[0] == gguf.GGUFValueType.STRING:
        return bytes(f.parts[f.data[0]]).decode("utf-8", "replace")
    return f.parts[f.data[0]].tolist()[0]


def tiny_model(src: Path, path: Path):
    """A 1-layer llama with the first N_TOKENS of src's vocabulary and F16/F32 tensors."""
    r = gguf.GGUFReader(str(src))
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("fuzz-seed")
    w.add_context_length(256)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(1)
    w.add_feed_forward_length(16)
    w.add_head_count(2)
    w.add_head_count_kv(1)
    w.add_rope_dimension_count(N_EMBD // 2)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_tokenizer_model(field_value(r, "tokenizer.ggml.model"))
    if (pre := field_value(r, "tokenizer.ggml.pre")) is not None:
        w.add_tokenizer_pre(pre)
    w.add_token_list(field_value(r, "tokenizer.ggml.tokens")[:N_TOKENS])
    if (scores := field_value(r, "tokenizer.ggml.scores")) is not None:
        w.add_token_scores(scores[:N_TOKENS])
    w.add_token_types(field_value(r, "tokenizer.ggml.token_type")[:N_TOKENS])
    if (merges := field_value(r, "tokenizer.ggml.merges")) is not None:
        w.add_token_merges(merges[:200])
    for key, add in (("bos", w.add_bos_token_id), ("eos", w.add_eos_token_id), ("unknown", w.add_unk_token_id)):
        if (v := field_value(r, f"tokenizer.ggml.{key}_token_id")) is not None:
            add(v)
    if (t := field_value(r, "tokenizer.chat_template")) is not None:
        w.add_chat_template(t)
    rng = np.random.default_rng(0)
    w.add_tensor("token_embd.weight", rng.standard_normal((N_TOKENS, N_EMBD)).astype(np.float16))
    w.add_tensor("output_norm.weight", np.ones(N_EMBD, np.float32))
    for name, shape in (("attn_norm", (N_EMBD,)), ("ffn_norm", (N_EMBD,)), ("attn_q", (N_EMBD, N_EMBD)),
                        ("attn_k", (N_EMBD // 2, N_EMBD)), ("attn_v", (N_EMBD // 2, N_EMBD)),
                        ("attn_output", (N_EMBD, N_EMBD)), ("ffn_gate", (16, N_EMBD)), ("ffn_up", (16, N_EMBD)),
                        ("ffn_down", (N_EMBD, 16))):
        w.add_tensor(f"blk.0.{name}.weight", rng.standard_normal(shape).astype(np.float16 if len(shape) == 2 else np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def gguf_seeds(bpe: Path, spm: Path):
    d = OUT / "gguf"
    d.mkdir(parents=True, exist_ok=True)
    for tag, src in (("bpe", bpe), ("spm", spm)):
        full = d / f"tiny_{tag}_v3"  # no .gguf suffix: the repository ignores *.gguf
        tiny_model(src, full)
        data = full.read_bytes()
        (d / f"tiny_{tag}_v2").write_bytes(data[:4] + (2).to_bytes(4, "little") + data[8:])
        header_end = gguf.GGUFReader(str(full)).data_offset
        for cut in (24, 64, 300, header_end - 1, header_end + 100):
            (d / f"tiny_{tag}_cut{cut}").write_bytes(data[:cut])


def tokenizer_seeds():
    d = OUT / "tokenizer"
    d.mkdir(parents=True, exist_ok=True)
    rows = [json.loads(line) for line in (ROOT / "tests" / "fixtures" / "tokenizer_corpus.jsonl").open()]
    picked = rows[::12] + [r for r in rows if "hex" in r][:4]  # every 12th string: each kind of text in the corpus, a few of each
    for i, row in enumerate(picked):
        flags = i % 8
        text = bytes.fromhex(row["hex"]) if "hex" in row else row["text"].encode()
        (d / f"s{i:03d}").write_bytes(bytes([flags]) + text)


TEMPLATES = {
    # The other families' templates as their models ship them (abridged to the markers detection reads).
    "llama3": "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}",
    "llama2": "{% for message in messages %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% endif %}{% endfor %}",
    "zephyr": "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\n' + message['content'] + eos_token }}\n{% elif message['role'] == 'system' %}\n{{ '<|system|>\n' + message['content'] + eos_token }}\n{% elif message['role'] == 'assistant' %}\n{{ '<|assistant|>\n'  + message['content'] + eos_token }}\n{% endif %}\n{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}",
    "gemma": "{{ bos_token }}{% for message in messages %}{% set role = 'model' if message['role'] == 'assistant' else message['role'] %}{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}",
    "unknown": "{{ messages }}",
}


def chat_template_seeds(bpe: Path):
    d = OUT / "chat_template"
    d.mkdir(parents=True, exist_ok=True)
    templates = dict(TEMPLATES, smollm2=field_value(gguf.GGUFReader(str(bpe)), "tokenizer.chat_template"))
    messages = [("system", "Be brief."), ("user", "Hi <|im_end|> there"), ("assistant", "Hello!"), ("user", "🦙?")]
    for i, (name, tmpl) in enumerate(sorted(templates.items())):
        fields = [tmpl] + [x for m in messages[: 1 + i % 4] for x in m]
        (d / name).write_bytes(bytes([(i * 2 + 1) & 0xF]) + "\0".join(fields).encode())


def plan_seeds(strata: str, bpe: Path, spm: Path):
    d = OUT / "plan"
    d.mkdir(parents=True, exist_ok=True)
    runs = {
        "spm_default": ["-m", str(spm)],
        "spm_dram": ["-m", str(spm), "--dram", "4M", "--gpu", "none"],
        "bpe_rtx4090": ["-m", str(bpe), "--gpu", "rtx4090", "--dram", "16G"],
        "bpe_throughput": ["-m", str(bpe), "--gpu", "t4", "--workload", "prompt=128,gen=32,batch=8,objective=throughput"],
    }
    with tempfile.TemporaryDirectory() as tmp:
        for name, args in runs.items():
            out = Path(tmp) / name
            subprocess.run([strata, "plan", *args, "-o", str(out)], check=True, capture_output=True)
            # Compact JSON: same document, fewer bytes for the fuzzer to wade through.
            doc = json.loads(out.read_text())
            doc["hardware"] = "seed"  # the summary of the machine that made it, paths included
            (d / f"{name}.json").write_text(json.dumps(doc, separators=(",", ":")))


OPENAI_BODIES = {
    # (endpoint flag: 0 chat, 1 completions, body)
    "chat_min": (0, {"model": "smollm2", "messages": [{"role": "user", "content": "Hi"}]}),
    "chat_full": (0, {"messages": [{"role": "system", "content": "Be brief."}, {"role": "developer", "content": "x"},
                                   {"role": "user", "content": [{"type": "text", "text": "Hello "}, {"type": "text", "text": "there"}]},
                                   {"role": "assistant", "content": "Hi!"}, {"role": "user", "content": "Tell me more"}],
                      "max_tokens": 32, "max_completion_tokens": 16, "temperature": 0.7, "top_p": 0.9, "top_k": 40,
                      "min_p": 0.05, "seed": 7, "stop": ["\n\n", "User:"], "stream": True,
                      "stream_options": {"include_usage": True}, "presence_penalty": 0.5, "frequency_penalty": 0.2,
                      "repeat_penalty": 1.1, "n": 1, "user": "u1", "ignore_eos": False}),
    "chat_unsupported": (0, {"messages": [{"role": "user", "content": "x"}], "logprobs": True, "tools": [],
                             "response_format": {"type": "json_object"}, "logit_bias": {"1": 2}}),
    "completion_text": (1, {"model": "smollm2", "prompt": "Once upon a time", "max_tokens": 8, "stop": "\n", "echo": False}),
    "completion_ids": (1, {"prompt": [1, 2, 3, 49151], "max_tokens": 4, "temperature": 0, "best_of": 1, "suffix": None}),
    "completion_list": (1, {"prompt": ["a", "b"], "stream": False, "top_logprobs": 0}),
    "chat_tools": (0, {"messages": [{"role": "user", "content": "Weather?"},
                                    {"role": "assistant", "content": None, "tool_calls": [
                                        {"id": "call_1", "type": "function",
                                         "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
                                    {"role": "tool", "tool_call_id": "call_1", "content": "22 C"}],
                       "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {
                           "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
                       "tool_choice": "required", "parallel_tool_calls": False, "n": 2, "logprobs": True, "top_logprobs": 3}),
    "chat_schema": (0, {"messages": [{"role": "user", "content": "JSON"}], "response_format": {
        "type": "json_schema", "json_schema": {"name": "s", "strict": True, "schema": {
            "$defs": {"n": {"type": "object", "properties": {"k": {"type": "array", "items": {"$ref": "#/$defs/n"}}}}},
            "type": "object", "properties": {"a": {"enum": [1, "x", None]}, "b": {"anyOf": [{"type": "string", "maxLength": 3},
                                                                                          {"$ref": "#/$defs/n"}]}},
            "additionalProperties": {"type": "integer"}}}}}),
    "completion_grammar": (1, {"prompt": "x", "grammar": "root ::= [a-z]{1,3} (\" \" root)?", "logprobs": 2}),
}


def openai_seeds():
    d = OUT / "openai_request"
    d.mkdir(parents=True, exist_ok=True)
    for name, (endpoint, body) in OPENAI_BODIES.items():
        (d / name).write_bytes(bytes([endpoint]) + json.dumps(body).encode())


PLAN_BODIES = {
    "shape_gpu": {"model": "llama3-70b", "weight_type": "Q4_K", "gpu": "rtx4090", "gpu_mem": "16G", "dram": "64G", "nvme": "gen4"},
    "throughput": {"model": "opt-30b", "gpu": "t4", "dram": "200G", "nvme": "gen3", "batch": 32, "prompt_len": 1024,
                   "gen_len": 32, "objective": "throughput", "kv_type": "auto"},
    "cpu_only": {"model": "llama3-8b", "gpu": "none", "dram": "32G", "cpu": "ryzen9-7950x", "no_cpu_attention": True},
    "local_model": {"model": "model.gguf", "gpu": "h100-80g", "pcie": "gen5", "no_recompute": True},
    "every_field": {"model": "qwen2.5-7b", "weight_type": "Q8_0", "kv_type": "Q8_0", "gpu": "l40s", "gpu_mem": "40G",
                    "pcie": "gen4", "cpu": "epyc-9654", "dram": "256G", "dram_kind": "ddr5-4800", "nvme": "gen5",
                    "nvme_bw": 10.5, "nvme_size": "4T", "gpu_budget": "90%", "dram_budget": "128G",
                    "nvme_budget": "1T", "batch": 8, "prompt_len": 2048, "gen_len": 256, "objective": "latency"},
    "system": {"model": "opt-175b", "system": "flexgen-t4", "batch": 64, "objective": "throughput"},
}


def plan_request_seeds():
    d = OUT / "plan_request"
    d.mkdir(parents=True, exist_ok=True)
    for name, body in PLAN_BODIES.items():
        (d / f"{name}.json").write_bytes(json.dumps(body).encode())


def main():
    cache = Path(os.environ.get("STRATA_MODELS", Path.home() / ".cache" / "strata" / "models"))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bpe", type=Path, default=cache / "SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--spm", type=Path, default=ROOT.parent / "shared" / "models" / "stories260K.gguf")
    ap.add_argument("--strata", default=str(ROOT / "build" / "strata"))
    a = ap.parse_args()
    gguf_seeds(a.bpe, a.spm)
    tokenizer_seeds()
    openai_seeds()
    plan_request_seeds()
    chat_template_seeds(a.bpe)
    plan_seeds(a.strata, a.bpe, a.spm)


if __name__ == "__main__":
    main()
