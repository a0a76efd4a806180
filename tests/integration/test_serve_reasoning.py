#!/usr/bin/env python3
"""A reasoning model's reply from `strata serve`, on SmolLM2-135M served with Qwen3's chat
template: the reasoning comes apart from the answer as `reasoning_content` (OpenAI) and
`thinking` (Ollama), splitting the very text `reasoning_format: "none"` gives whole, as an
independent reading of Qwen3's <think> block splits it, streamed alike;
`chat_template_kwargs.enable_thinking: false` and Ollama's `think: false` close an empty think
block after the generation prompt; a required tool call comes back through Qwen3's tool format;
/api/show names the model's `thinking` and `tools` capabilities."""
from __future__ import annotations

import json
import re

from serve_support import Server
from strata_support import default_model

MODEL = default_model()
# Greedy, held by a grammar to a think block and an answer (the small model writes neither
# unasked), their words its own.
ASK = {"model": MODEL.stem, "temperature": 0, "max_tokens": 60,
       "messages": [{"role": "user", "content": "Think, then greet me."}],
       "grammar": 'root ::= "<think>\\n" [a-z ]{1,30} "\\n</think>\\n\\n" [A-Za-z !.]{1,20}'}


def fail(msg: str) -> None:
    raise SystemExit(f"FAIL: {msg}")


def split_qwen3(text: str) -> tuple[str, str]:
    """Qwen3's reply read as its template reads an earlier turn: the block's text, trimmed, and
    what follows it; a reply not opening with the block is all answer."""
    m = re.match(r"\s*<think>(.*?)(?:</think>(.*))?\Z", text, re.S)
    if not m:
        return "", text
    return m.group(1).strip(), (m.group(2) or "").lstrip()


def stream(server: Server, body: dict) -> tuple[str, str]:
    conn = server.connection()
    conn.request("POST", "/v1/chat/completions", body=json.dumps({**body, "stream": True}),
                 headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    reasoning, content = "", ""
    for line in resp.read().decode().splitlines():
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        for choice in json.loads(line[6:])["choices"]:
            reasoning += choice["delta"].get("reasoning_content", "")
            content += choice["delta"].get("content") or ""
    return reasoning, content


def main() -> None:
    with Server(MODEL, "--chat-template", "qwen3", threads=2) as s:
        status, _, raw = s.request("POST", "/v1/chat/completions", {**ASK, "reasoning_format": "none"})
        if status != 200:
            fail(f"reasoning_format none: {status} {raw}")
        text = raw["choices"][0]["message"]["content"]
        status, _, apart = s.request("POST", "/v1/chat/completions", ASK)
        message = apart["choices"][0]["message"]
        want_reasoning, want_content = split_qwen3(text)
        if (message.get("reasoning_content", ""), message["content"]) != (want_reasoning, want_content):
            fail(f"the reply {text!r} came apart as {message!r}")
        if stream(s, ASK) != (want_reasoning, want_content):
            fail(f"streamed, the reply {text!r} came apart as {stream(s, ASK)!r}")
        print(f"ok: the reply {text!r} comes apart as reasoning {want_reasoning!r}, answer {want_content!r}, whole and streamed")

        off = {**ASK, "chat_template_kwargs": {"enable_thinking": False}}
        n_on = apart["usage"]["prompt_tokens"]
        n_off = s.request("POST", "/v1/chat/completions", off)[2]["usage"]["prompt_tokens"]
        if not n_off > n_on:
            fail(f"enable_thinking false: the prompt has {n_off} tokens, with it on {n_on}")
        ollama = {"model": MODEL.stem, "messages": ASK["messages"], "stream": False, "think": False,
                  "options": {"temperature": 0, "num_predict": 60}}
        status, _, o = s.request("POST", "/api/chat", ollama)
        if status != 200 or o["prompt_eval_count"] != n_off or "thinking" in o["message"]:
            fail(f"Ollama's think false: {status} {o}")
        # Ollama's requests have no grammar: the same request without it on both APIs.
        free = {k: v for k, v in ASK.items() if k != "grammar"}
        want = s.request("POST", "/v1/chat/completions", free)[2]["choices"][0]["message"]
        status, _, o = s.request("POST", "/api/chat", {**ollama, "think": True})
        if (o["message"].get("thinking"), o["message"]["content"]) != (want.get("reasoning_content"), want["content"]):
            fail(f"Ollama's think true: {o['message']!r}, the OpenAI answer {want!r}")
        print(f"ok: thinking turned off adds {n_off - n_on} prompt tokens, on both APIs; Ollama's think true answers as OpenAI's API does")

        weather = {"type": "function", "function": {"name": "get_weather", "parameters": {
            "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
        status, _, called = s.request("POST", "/v1/chat/completions", {**free, "tools": [weather], "tool_choice": "required"})
        choice = called["choices"][0] if status == 200 else {}
        # (max_tokens may cut the small model's next call: finish_reason "length" then)
        if not choice.get("message", {}).get("tool_calls") or choice["message"]["tool_calls"][0]["function"]["name"] != "get_weather":
            fail(f"a required call with Qwen3's template: {status} {called}")
        print(f"ok: Qwen3's template calls tools: {choice['message']['tool_calls'][0]['function']}")

        status, _, shown = s.request("POST", "/api/show", {"model": MODEL.stem})
        if not {"thinking", "tools"} <= set(shown.get("capabilities", [])):
            fail(f"/api/show lists {shown.get('capabilities')}")
        status, _, bad = s.request("POST", "/v1/chat/completions", {**ASK, "reasoning_format": "raw"})
        if status != 400 or bad["error"]["param"] != "reasoning_format":
            fail(f"reasoning_format raw: {status} {bad}")
        print("ok: /api/show names the thinking and tools capabilities; an unknown reasoning_format is a 400 naming it")


if __name__ == "__main__":
    main()
