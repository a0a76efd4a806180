#!/usr/bin/env python3
"""Conversations with tools render as each model's own template renders them: the Qwen2.5
(Hermes), Qwen3, Llama 3.1 and Mistral Nemo templates in tests/fixtures/chat_templates/, rendered by
jinja2 as Hugging Face's apply_chat_template does, against `strata serve`'s /apply-template on
a copy of stories260K (or its stand-in) carrying that template (the vocabulary does not matter to
the text); and the template arguments a request may give (reasoning effort, thinking off)."""
from __future__ import annotations

import copy
import json
import sys
import tempfile
from pathlib import Path

from jinja_templates import TEMPLATES, render, with_template
from serve_support import Server
from strata_support import tiny_llama

STORIES = tiny_llama()

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather \"now\" in a city, in °C",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "e.g. Zürich"},
                                                    "days": {"type": "integer"}}, "required": ["city"]}}}
CLOCK = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}


def hf_messages(messages: list[dict]) -> list[dict]:
    """OpenAI messages as Hugging Face templates take them: a call's arguments as a dict."""
    out = copy.deepcopy(messages)
    for m in out:
        for call in m.get("tool_calls", []):
            call["function"]["arguments"] = json.loads(call["function"]["arguments"])
        if m.get("content") is None:
            m["content"] = ""
    return out


def call(call_id: str, name: str, args: dict) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def conversations(ids: tuple[str, str], parallel: bool) -> list[tuple[str, list[dict], list[dict] | None]]:
    a, b = ids
    asked = [{"role": "user", "content": "What's the weather in Zürich and Paris?"}]
    calls = [call(a, "get_weather", {"city": "Zürich", "days": 2})]
    if parallel:
        calls.append(call(b, "get_weather", {"city": "Paris"}))
    answered = asked + [{"role": "assistant", "content": None, "tool_calls": calls},
                        {"role": "tool", "tool_call_id": a, "content": "{\"temp\": 21}"}]
    if parallel:
        answered.append({"role": "tool", "tool_call_id": b, "content": "sunny"})
    answered += [{"role": "assistant", "content": "Warm in both."}, {"role": "user", "content": "And tomorrow?"}]
    system = [{"role": "system", "content": "Be brief.\nUse tools."}]
    return [
        ("tools offered", asked, [WEATHER, CLOCK]),
        ("tools offered, a system prompt", system + asked, [WEATHER]),
        ("calls and their results", answered, [WEATHER, CLOCK]),
        ("calls and results, a system prompt", system + answered, [WEATHER]),
        ("results without tools offered", answered, None),
    ]


def mid_thought() -> list[tuple[str, list[dict], list[dict] | None]]:
    """Qwen3's: a call made while reasoning after the last query, and its result, which keep the reasoning."""
    asked = [{"role": "user", "content": "Weather in Zürich?"}]
    thinking = {"role": "assistant", "content": "<think>\nI need the weather.\n</think>\n\n",
                "tool_calls": [call("call_1", "get_weather", {"city": "Zürich"})]}
    apart = {"role": "assistant", "content": "", "reasoning_content": "I need the weather.",
             "tool_calls": [call("call_1", "get_weather", {"city": "Zürich"})]}
    result = {"role": "tool", "tool_call_id": "call_1", "content": "21"}
    return [("a call while reasoning, and its result", asked + [thinking, result], [WEATHER]),
            ("a call with its reasoning_content sent back", asked + [apart, result], [WEATHER])]


def check(family: str, template_file: str, bos: str, eos: str, ids: tuple[str, str], parallel: bool, extra=()) -> None:
    template = (TEMPLATES / template_file).read_text()
    with tempfile.TemporaryDirectory() as tmp:
        with Server(with_template(STORIES, template_file, Path(tmp) / f"{family}.gguf")) as server:
            for name, messages, tools in conversations(ids, parallel) + list(extra):
                body = {"messages": messages}
                if tools:
                    body["tools"] = tools
                status, _, got = server.request("POST", "/apply-template", body)
                assert status == 200, (family, name, got)
                want = render(template, hf_messages(messages), bos, eos, tools)
                if got["prompt"] != want:
                    sys.exit(f"{family}, {name}: strata rendered\n{got['prompt']!r}\nthe template renders\n{want!r}")
                print(f"ok: {family}: {name}")


def check_template_arguments() -> None:
    """The template arguments a chat request may give: gpt-oss's reasoning_effort (OpenAI's field,
    or chat_template_kwargs'), and Qwen3's enable_thinking false."""
    asked = [{"role": "user", "content": "Hi"}]
    cases = [("gpt-oss", "openai-gpt-oss.jinja", "<|return|>", {"reasoning_effort": "high"}, {"reasoning_effort": "high"}),
             ("gpt-oss", "openai-gpt-oss.jinja", "<|return|>", {"chat_template_kwargs": {"reasoning_effort": "low"}},
              {"reasoning_effort": "low"}),
             # OpenAI's lowest level, which harmony does not have: its lowest.
             ("gpt-oss", "openai-gpt-oss.jinja", "<|return|>", {"reasoning_effort": "minimal"}, {"reasoning_effort": "low"}),
             ("qwen3", "qwen3.jinja", "</s>", {"chat_template_kwargs": {"enable_thinking": False}}, {"enable_thinking": False})]
    with tempfile.TemporaryDirectory() as tmp:
        for family, template_file, eos, fields, kwargs in cases:
            with Server(with_template(STORIES, template_file, Path(tmp) / f"{family}.gguf")) as server:
                status, _, got = server.request("POST", "/apply-template", {"messages": asked, **fields})
                want = render((TEMPLATES / template_file).read_text(), asked, "", eos, None, **kwargs)
                if status != 200 or got["prompt"] != want:
                    sys.exit(f"{family}, {fields}: strata rendered\n{got!r}\nthe template renders\n{want!r}")
                print(f"ok: {family}: {fields} renders as the template does with {kwargs}")


def main() -> None:
    check("qwen2.5", "qwen2.5-instruct.jinja", "<s>", "</s>", ("call_1", "call_2"), parallel=True)
    check("qwen3", "qwen3.jinja", "<s>", "</s>", ("call_1", "call_2"), parallel=True, extra=mid_thought())
    check("llama3.1", "llama-3.1-instruct.jinja", "<|begin_of_text|>", "<|eot_id|>", ("call_1", "call_2"), parallel=False)
    check("mistral-nemo", "mistral-nemo-instruct.jinja", "<s>", "</s>", ("A1b2C3d4E", "f5G6h7I8j"), parallel=True)
    check_template_arguments()


if __name__ == "__main__":
    main()
