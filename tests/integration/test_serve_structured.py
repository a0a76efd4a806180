#!/usr/bin/env python3
"""Structured output and tool calls from `strata serve` with the official `openai` client, on
SmolLM2-135M, checked by the `jsonschema` validator: every reply held to a random JSON schema
(a small generator of nested objects, arrays, enums, unions) parses and validates; every
`required` or named tool call parses into a call of an offered function whose arguments
validate against its parameters, whole or streamed; with tool_choice auto a reply never holds a
malformed call; `strata generate --json-schema` holds to its schema too."""
from __future__ import annotations

import json
import random
import subprocess
import tempfile

from serve_support import Server
from strata_support import STRATA_BIN, default_model, skip

try:
    import jsonschema
    import openai
except ImportError as e:
    skip(f"{e.name} is missing (pip install -r scripts/requirements.txt)")

MODEL = default_model()
WORDS = ["name", "city", "count", "tags", "ok", "size", "note", "kind"]


def random_schema(rng: random.Random, depth: int = 0) -> dict:
    kinds = ["string", "integer", "number", "boolean", "null", "enum"] + (["object", "array", "union"] if depth < 2 else [])
    kind = rng.choice(kinds)
    if kind == "string":
        s = {"type": "string", "maxLength": rng.randint(1, 12)}
        if rng.random() < 0.3:
            s["minLength"] = 1
        return s
    if kind == "enum":
        return {"enum": rng.sample(["red", "green", 3, None, True, "two words", 1.5], k=rng.randint(1, 4))}
    if kind == "array":
        s = {"type": "array", "items": random_schema(rng, depth + 1), "maxItems": rng.randint(1, 3)}
        if rng.random() < 0.5:
            s["minItems"] = 1
        return s
    if kind == "integer" and rng.random() < 0.6:
        lo = rng.randint(-50, 50)
        return {"type": "integer", "minimum": lo, "maximum": lo + rng.randint(0, 200)}
    if kind == "number" and rng.random() < 0.4:
        return {"type": "number", "minimum": 0}
    if kind == "union":
        return {"anyOf": [random_schema(rng, depth + 1), random_schema(rng, depth + 1)]}
    if kind == "object":
        return random_object(rng, depth + 1)
    return {"type": kind}


def random_object(rng: random.Random, depth: int = 0) -> dict:
    names = rng.sample(WORDS, k=rng.randint(1, 3))
    props = {n: random_schema(rng, depth) for n in names}
    return {"type": "object", "properties": props, "required": [n for n in names if rng.random() < 0.6],
            "additionalProperties": False}


def check_response_formats(client) -> None:
    rng = random.Random(5)
    for i in range(10):
        schema = random_object(rng)
        reply = client.chat.completions.create(
            model=MODEL.stem, messages=[{"role": "user", "content": "Describe a thing as JSON."}], temperature=0.8, seed=i,
            max_tokens=1500, response_format={"type": "json_schema", "json_schema": {"name": "thing", "schema": schema, "strict": True}})
        choice = reply.choices[0]
        assert choice.finish_reason == "stop", (schema, choice)
        jsonschema.validate(json.loads(choice.message.content), schema)
    # json_object bounds no string's length: a sampled reply may still be writing one at
    # max_tokens (which seed does depends on the CPU's float rounding). A reply that stops is a
    # whole object; one cut is an object's start; most stop.
    stopped = 0
    for seed in range(1, 5):
        reply = client.chat.completions.create(model=MODEL.stem, messages=[{"role": "user", "content": "A JSON object, please."}],
                                               temperature=0.8, seed=seed, max_tokens=1500, response_format={"type": "json_object"})
        choice = reply.choices[0]
        if choice.finish_reason == "stop":
            assert isinstance(json.loads(choice.message.content), dict), reply
            stopped += 1
        else:
            assert choice.finish_reason == "length" and choice.message.content.lstrip().startswith("{"), reply
    assert stopped >= 2, f"{stopped} of 4 json_object replies stopped within 1500 tokens"
    print("ok: 10 random schemas and json_object: every reply validates")


def tools_for(rng: random.Random) -> list[dict]:
    return [{"type": "function", "function": {"name": name, "description": f"Look up the {name.replace('_', ' ')}.",
                                              "parameters": random_object(rng)}}
            for name in ["get_weather", "find_flight", "add_note"]]


def check_calls(reply, tools: list[dict], only: str | None = None, whole: bool = True) -> list:
    """The calls of a reply, each of an offered function (`only`, when named) with arguments
    that validate. A reply that repeats a call ends there ("tool_calls"); one sampled freely may
    still write new calls till max_tokens (`whole` False), and the calls before the cut are whole."""
    params = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls" or (not whole and choice.finish_reason == "length"), choice
    calls = choice.message.tool_calls
    assert calls, choice
    for c in calls:
        assert c.type == "function" and c.id, c
        assert c.function.name in params and (only is None or c.function.name == only), c
        jsonschema.validate(json.loads(c.function.arguments), params[c.function.name])
    return calls


def check_tools(client) -> None:
    rng = random.Random(9)
    ask = [{"role": "system", "content": "You can call tools."}, {"role": "user", "content": "Plan my trip to Paris."}]
    for i in range(6):
        tools = tools_for(rng)
        check_calls(client.chat.completions.create(model=MODEL.stem, messages=ask, tools=tools, tool_choice="required",
                                                   temperature=0.8, seed=i, max_tokens=300), tools, whole=False)
        # Greedy, a model made to call repeats its call: the repeat ends the reply, not max_tokens.
        check_calls(client.chat.completions.create(model=MODEL.stem, messages=ask, tools=tools, tool_choice="required",
                                                   temperature=0, max_tokens=600), tools)
        named = tools[i % 3]["function"]["name"]
        once = check_calls(client.chat.completions.create(model=MODEL.stem, messages=ask, tools=tools, temperature=0.8, seed=i,
                                                          max_tokens=600, tool_choice={"type": "function", "function": {"name": named}}),
                           tools, named)
        assert len(once) == 1, once  # a named function is called once
        single = client.chat.completions.create(model=MODEL.stem, messages=ask, tools=tools, tool_choice="required", temperature=0.8,
                                                seed=i, max_tokens=600, parallel_tool_calls=False)
        assert len(check_calls(single, tools)) == 1
    print("ok: required and named calls parse, validate against their parameters and end with the calls")

    # Two tools of one name: refused, since a call could not say which it means.
    try:
        client.chat.completions.create(model=MODEL.stem, messages=ask, tools=[tools[0], tools[0]], max_tokens=8)
        raise AssertionError("duplicate tool names were accepted")
    except openai.BadRequestError as e:
        assert e.body["param"] == "tools[1].function.name", e.body

    # auto: whatever the model writes, a call it starts is well formed.
    tools = tools_for(rng)
    hermes = [{"role": "system", "content": "Call a tool for every request, in <tool_call></tool_call> tags."},
              {"role": "user", "content": "What is the weather in Paris? Use get_weather."}]
    n_calls = 0
    for i in range(8):
        reply = client.chat.completions.create(model=MODEL.stem, messages=hermes, tools=tools, temperature=1.0, seed=i, max_tokens=400)
        choice = reply.choices[0]
        if choice.message.tool_calls:
            n_calls += 1
            check_calls(reply, tools, whole=False)
        elif choice.finish_reason != "length":
            assert "<tool_call>" not in (choice.message.content or ""), choice
    print(f"ok: auto: {n_calls} of 8 replies called, every call well formed")

    # Streamed: the deltas add up to the whole reply's calls.
    kw = dict(model=MODEL.stem, messages=ask, tools=tools, tool_choice="required", temperature=0, max_tokens=600, parallel_tool_calls=False)
    whole = check_calls(client.chat.completions.create(**kw), tools)
    calls: dict[int, dict] = {}
    finish = None
    for chunk in client.chat.completions.create(**kw, stream=True):
        for c in chunk.choices:
            for d in c.delta.tool_calls or []:
                entry = calls.setdefault(d.index, {"name": "", "arguments": ""})
                entry["name"] += d.function.name or ""
                entry["arguments"] += d.function.arguments or ""
            finish = c.finish_reason or finish
    assert finish == "tool_calls", finish
    assert [calls[i] for i in sorted(calls)] == [{"name": c.function.name, "arguments": c.function.arguments} for c in whole]

    # The conversation goes on with the call and its result.
    follow = ask + [{"role": "assistant", "content": None, "tool_calls": [c.model_dump() for c in whole]}] + \
        [{"role": "tool", "tool_call_id": c.id, "content": "{\"ok\": true}"} for c in whole]
    reply = client.chat.completions.create(model=MODEL.stem, messages=follow, tools=tools, temperature=0, max_tokens=24)
    assert reply.choices[0].finish_reason in ("stop", "length", "tool_calls"), reply
    print("ok: streamed calls equal the whole reply's; tool results are taken back")


def check_generate_schema() -> None:
    schema = random_object(random.Random(3))
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(schema, f)
        f.flush()
        out = subprocess.run([STRATA_BIN, "generate", "-m", str(MODEL), "-p", "JSON:", "--json-schema", f.name, "-n", "1500",
                              "--temp", "0.8", "--json"], check=True, capture_output=True, text=True, timeout=300).stdout
    result = json.loads(out)
    assert result["stop_reason"] == "eos", result
    jsonschema.validate(json.loads(result["text"]), schema)
    # A schema nested past the server's bound is refused by name, as the server refuses it (it
    # exhausted the stack of the code walking it).
    deep = '{"type": "array", "items": ' * 5000 + '{"type": "string"}' + "}" * 5000  # past Python's own json nesting
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        f.write(deep)
        f.flush()
        r = subprocess.run([STRATA_BIN, "generate", "-m", str(MODEL), "-p", "JSON:", "--json-schema", f.name, "-n", "4"],
                           capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "more than 64 levels deep" in r.stderr, (r.returncode, r.stderr)
    print("ok: strata generate --json-schema")


def main() -> None:
    with Server(MODEL) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0)
        check_response_formats(client)
        check_tools(client)
    check_generate_schema()


if __name__ == "__main__":
    main()
