#!/usr/bin/env python3
"""Ollama's API on `strata serve`, driven by the official `ollama` client: list, show, ps,
version; chat and generate, whole and streamed (newline-delimited JSON), templated and raw,
each equal to the OpenAI endpoint's answer for the same request; options mapped to the
sampler (seeded runs repeat); format "json" and a JSON schema held by the grammar; tools;
keep_alive loading and unloading models; embed and embeddings equal to /v1/embeddings; errors
in Ollama's shape."""
from __future__ import annotations

import json
import subprocess
import tempfile
import time
from pathlib import Path

from serve_support import Server, sse_events
from strata_support import STRATA_BIN, default_model, skip, tiny_llama

try:
    import jsonschema
    import ollama
    import openai
except ImportError as e:
    skip(f"a Python package is missing ({e.name}): pip install -r scripts/requirements.txt")

SMOL = default_model()
STORIES = tiny_llama()
ASK = [{"role": "user", "content": "Name three colours of the rainbow."}]
PERSON = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
          "required": ["name", "age"], "additionalProperties": False}


def check_models(client: ollama.Client, server: Server) -> None:
    tags = {m.model: m for m in client.list().models}
    assert set(tags) == {SMOL.stem, "stories-a"}, tags
    smol = tags[SMOL.stem]
    assert smol.size == SMOL.stat().st_size and smol.details.format == "gguf", smol
    assert smol.details.family == "llama" and smol.details.quantization_level == "Q4_1", smol.details
    assert smol.details.parameter_size.endswith("M") and len(smol.digest) == 64, smol
    status, _, raw = server.request("GET", "/api/tags")
    assert status == 200 and all(m["context_length"] > 0 for m in raw["models"]), raw

    shown = client.show(SMOL.stem)
    assert shown.modelinfo["general.architecture"] == "llama", shown.modelinfo
    assert shown.modelinfo["llama.context_length"] > 0 and "tools" in shown.capabilities, shown.capabilities
    assert shown.details.quantization_level == "Q4_1"

    running = {m.model: m for m in client.ps().models}
    assert set(running) == {SMOL.stem}, running  # the default model, loaded at start
    assert running[SMOL.stem].context_length > 0 and running[SMOL.stem].size > 0

    status, _, body = server.request("GET", "/api/version")
    assert status == 200 and body["version"], body
    print("ok: list, show, ps and version")


def check_chat_and_generate(client: ollama.Client, oa: openai.OpenAI) -> None:
    greedy = {"temperature": 0, "num_predict": 24}
    whole = client.chat(model=SMOL.stem, messages=ASK, options=greedy)
    reference = oa.chat.completions.create(model=SMOL.stem, messages=ASK, max_tokens=24, temperature=0)
    assert whole.message.role == "assistant" and whole.message.content == reference.choices[0].message.content, whole
    assert whole.done and whole.done_reason in ("stop", "length") and whole.eval_count == reference.usage.completion_tokens, whole
    assert whole.total_duration > 0 and whole.eval_duration > 0, whole
    # The prompt's tokens, those of the KV cache the OpenAI request left behind too.
    assert whole.prompt_eval_count == reference.usage.prompt_tokens, (whole.prompt_eval_count, reference.usage)

    parts = list(client.chat(model=SMOL.stem, messages=ASK, options=greedy, stream=True))
    assert "".join(p.message.content for p in parts) == whole.message.content
    assert all(not p.done for p in parts[:-1]) and parts[-1].done and parts[-1].done_reason == whole.done_reason, parts[-1]

    prompt = ASK[0]["content"]
    gen = client.generate(model=SMOL.stem, prompt=prompt, options=greedy)
    assert gen.response == whole.message.content and gen.done, gen  # the same conversation, templated
    streamed = "".join(p.response for p in client.generate(model=SMOL.stem, prompt=prompt, options=greedy, stream=True))
    assert streamed == gen.response
    raw = client.generate(model=SMOL.stem, prompt="The three primary colours are", raw=True, options={"temperature": 0, "num_predict": 12})
    out = subprocess.run([STRATA_BIN, "generate", "-m", str(SMOL), "-p", "The three primary colours are", "-n", "12", "--temp", "0",
                          "--json"], check=True, capture_output=True, text=True, timeout=120).stdout
    assert raw.response == json.loads(out)["text"], raw.response

    # Options reach the sampler: a seed repeats a sampled reply.
    seeded = {"temperature": 0.9, "seed": 11, "num_predict": 24}
    a = client.chat(model=SMOL.stem, messages=ASK, options=seeded).message.content
    assert a == client.chat(model=SMOL.stem, messages=ASK, options=seeded).message.content
    print("ok: chat and generate, whole and streamed, equal the OpenAI answers; options reach the sampler")


def check_format_and_tools(client: ollama.Client) -> None:
    ask = [{"role": "user", "content": "Describe a person as JSON."}]
    reply = client.chat(model=SMOL.stem, messages=ask, format="json", options={"temperature": 0.8, "seed": 1, "num_predict": 400})
    assert isinstance(json.loads(reply.message.content), dict), reply.message.content
    for seed in range(3):
        reply = client.chat(model=SMOL.stem, messages=ask, format=PERSON, options={"temperature": 0.8, "seed": seed, "num_predict": 400})
        jsonschema.validate(json.loads(reply.message.content), PERSON)
    # Keywords a grammar cannot hold (a pydantic model's bounds and pattern) are left to the model, as
    # Ollama leaves them: the reply has the schema's shape.
    scored = {"type": "object", "properties": {"confidence": {"type": "number", "minimum": 0, "maximum": 1},
                                               "code": {"type": "string", "pattern": "^[A-Z]{3}$"}},
              "required": ["confidence", "code"]}
    reply = client.chat(model=SMOL.stem, messages=ask, format=scored, options={"temperature": 0, "num_predict": 200})
    shaped = json.loads(reply.message.content)
    assert isinstance(shaped["confidence"], (int, float)) and isinstance(shaped["code"], str), shaped

    weather = {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
                                                "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                               "required": ["city"]}}}
    ask = [{"role": "user", "content": 'Say <tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'}]
    calls = []
    for seed in range(16):
        reply = client.chat(model=SMOL.stem, messages=ask, tools=[weather], options={"temperature": 0.7, "seed": seed, "num_predict": 120})
        for call in reply.message.tool_calls or []:
            assert call.function.name == "get_weather" and isinstance(call.function.arguments, dict), call  # objects, as Ollama's
            jsonschema.validate(call.function.arguments, weather["function"]["parameters"])
            calls.append(call)
        if calls:
            break
    assert calls, "no reply of 16 called the tool"
    follow = ask + [{"role": "assistant", "content": "", "tool_calls": [calls[0].model_dump(exclude_none=True)]},
                    {"role": "tool", "content": "{\"celsius\": 21}", "tool_name": "get_weather"}]
    assert client.chat(model=SMOL.stem, messages=follow, tools=[weather], options={"temperature": 0, "num_predict": 16}).done
    print(f"ok: format json and a JSON schema held; {len(calls)} tool call(s) with object arguments; results taken back")


def gauges(server: Server) -> dict:
    """The metrics stream's first event: the gauges summed over the models loaded now."""
    conn = server.connection(timeout=10)
    conn.request("GET", "/v1/metrics/stream")
    event = json.loads(next(sse_events(conn.getresponse())))
    conn.close()
    return {"dram": event["tiers"]["dram"]["used"], "kv_blocks": event["kv_blocks"]["total"]}


def check_keep_alive(client: ollama.Client, server: Server) -> None:
    before = gauges(server)
    loading = client.generate(model="stories-a", prompt="", keep_alive="1m")
    assert loading.done and loading.done_reason == "load", loading
    running = {m.model: m for m in client.ps().models}
    assert "stories-a" in running, running
    left = running["stories-a"].expires_at.timestamp() - time.time()
    assert 30 < left <= 61, left
    unloading = client.generate(model="stories-a", prompt="", keep_alive=0)
    assert unloading.done_reason == "unload", unloading
    deadline = time.time() + 5
    while "stories-a" in {m.model for m in client.ps().models}:
        assert time.time() < deadline, "keep_alive 0 did not unload the model"
        time.sleep(0.1)
    # An unloaded model's memory and KV blocks leave the live figures (its counters stay).
    assert gauges(server) == before, (gauges(server), before)
    print("ok: keep_alive loads a model for its time and 0 unloads it; its gauges go with it")


def check_embeddings(client: ollama.Client, oa: openai.OpenAI) -> None:
    texts = ["The quick brown fox.", "A slow green turtle."]
    ours = client.embed(model=SMOL.stem, input=texts)
    reference = [d.embedding for d in oa.embeddings.create(model=SMOL.stem, input=texts).data]
    assert len(ours.embeddings) == 2 and ours.prompt_eval_count > 0
    for got, want in zip(ours.embeddings, reference):
        assert max(abs(x - y) for x, y in zip(got, want)) < 1e-6
    legacy = client.embeddings(model=SMOL.stem, prompt=texts[0])
    assert max(abs(x - y) for x, y in zip(legacy.embedding, reference[0])) < 1e-6
    print("ok: embed and embeddings equal /v1/embeddings")


def check_errors(client: ollama.Client) -> None:
    # Options Ollama takes and ignores, and whole numbers written as floats, as Ollama reads them.
    inert = {"mirostat": 0, "mirostat_tau": 5.0, "mirostat_eta": 0.1, "rope_frequency_base": 10000.0, "num_gqa": 1,
             "num_predict": 4.0, "top_k": 40.0, "seed": 3.0, "temperature": 0}
    assert client.chat(model=SMOL.stem, messages=ASK, options=inert).done
    # A chat past the context goes on without its oldest turns, as Ollama's does (OpenAI's is a 400).
    long_chat = [{"role": "system", "content": "Be brief."}]
    for i in range(60):
        long_chat += [{"role": "user", "content": f"Story {i}: " + "the cat sat on the mat " * 12},
                      {"role": "assistant", "content": "Once upon a time " * 10}]
    long_chat.append({"role": "user", "content": "Summarize."})
    reply = client.chat(model=SMOL.stem, messages=long_chat, options={"temperature": 0, "num_predict": 8})
    assert reply.done and reply.prompt_eval_count < 4096, reply
    # A model served is pulled at once; the model store's other calls are refused by name.
    assert client.pull(SMOL.stem).status == "success"
    for call, status, words in [
        (lambda: client.chat(model="gpt-9-ultra", messages=ASK), 404, "model not found"),
        (lambda: client.pull("gpt-9-ultra"), 404, "downloads none"),
        (lambda: client.create(model="mine", from_=SMOL.stem), 501, "models folder"),
        (lambda: client.delete(SMOL.stem), 501, "models folder"),
        (lambda: client.chat(model=SMOL.stem, messages=ASK, options={"mirostat": 2}), 400, "options.mirostat"),
        (lambda: client.chat(model=SMOL.stem, messages=ASK, options={"temprature": 0.2}), 400, "options.temprature"),
        (lambda: client.generate(model=SMOL.stem, prompt="x", suffix="y"), 400, "suffix"),
        (lambda: client.show("nope"), 404, "nope"),
    ]:
        try:
            call()
            raise AssertionError(f"no {status}")
        except ollama.ResponseError as e:
            assert e.status_code == status and words in str(e.error), (e.status_code, e.error)
    print("ok: errors in Ollama's shape")


def main() -> None:
    start = time.time()
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / SMOL.name).symlink_to(SMOL)
        (Path(d) / "stories-a.gguf").symlink_to(STORIES)
        with Server(None, "--models-dir", d) as server:
            client = ollama.Client(host=f"http://127.0.0.1:{server.port}")
            oa = openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0)
            check_models(client, server)
            check_chat_and_generate(client, oa)
            check_format_and_tools(client)
            check_keep_alive(client, server)
            check_embeddings(client, oa)
            check_errors(client)
            assert server.stop() == 0, server.stderr()
    print(f"ok ({time.time() - start:.1f} s)")


if __name__ == "__main__":
    main()
