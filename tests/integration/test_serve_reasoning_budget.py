#!/usr/bin/env python3
"""A reasoning budget (llama.cpp's --reasoning-budget): SmolLM2-135M served with DeepSeek-R1's
template, whose prompt opens the reasoning that the small model never closes. Capped at N tokens,
the reply is the uncapped reply's first N tokens (their bytes from its logprobs), then the message
and the closer, then the answer; `reasoning_content` is those N tokens' text (and the message).
The server's --reasoning-budget is every request's; a request's thinking_budget_tokens
(llama.cpp's) or thinking_token_budget (vLLM's) replaces it, -1 lifts it; Ollama's think follows
the server's. `strata chat --reasoning-budget 0` answers at once."""
from __future__ import annotations

import json
import os
import subprocess

from serve_support import Server
from strata_support import STRATA_BIN, default_model

MODEL = default_model()
CLOSER = "\n</think>\n\n"
ASK = {"model": MODEL.stem, "temperature": 0, "max_tokens": 40,
       "messages": [{"role": "user", "content": "What is the capital of France?"}]}


def fail(msg: str) -> None:
    raise SystemExit(f"FAIL: {msg}")


def split_r1(text: str) -> tuple[str, str]:
    """DeepSeek-R1's reply (its block opened by the prompt): before </think>, trimmed, and after."""
    reasoning, _, answer = text.partition("</think>")
    return reasoning.strip(), answer.lstrip()


def streamed(server: Server, body: dict) -> tuple[str, str]:
    conn = server.connection()
    conn.request("POST", "/v1/chat/completions", body=json.dumps({**body, "stream": True}),
                 headers={"Content-Type": "application/json"})
    reasoning, content = "", ""
    for line in conn.getresponse().read().decode().splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            for choice in json.loads(line[6:])["choices"]:
                reasoning += choice["delta"].get("reasoning_content", "")
                content += choice["delta"].get("content") or ""
    return reasoning, content


def main() -> None:
    with Server(MODEL, "--chat-template", "deepseek-r1", "--reasoning-budget", "12", threads=2) as s:
        status, _, free = s.request("POST", "/v1/chat/completions", {**ASK, "thinking_budget_tokens": -1,
                                                                      "reasoning_format": "none", "logprobs": True})
        if status != 200:
            fail(f"an uncapped request: {status} {free}")
        tokens = [bytes(t["bytes"]) for t in free["choices"][0]["logprobs"]["content"]]
        if len(tokens) < 20 or "</think>" in free["choices"][0]["message"]["content"]:
            fail(f"the small model was to reason past 20 tokens without closing: {free}")

        def first(n: int) -> str:
            return b"".join(tokens[:n]).decode()

        for body, n, message, what in [({}, 12, "", "the server's budget"),
                                       ({"thinking_budget_tokens": 5}, 5, "", "thinking_budget_tokens 5"),
                                       ({"thinking_token_budget": 3, "thinking_budget_message": " Time to answer."}, 3,
                                        " Time to answer.", "thinking_token_budget 3 and a message")]:
            status, _, raw = s.request("POST", "/v1/chat/completions", {**ASK, **body, "reasoning_format": "none"})
            text = raw["choices"][0]["message"]["content"]
            want = first(n) + message + CLOSER
            if not text.startswith(want) or len(text) == len(want):
                fail(f"{what}: the reply {text!r} is not {want!r} and an answer")
            apart = s.request("POST", "/v1/chat/completions", {**ASK, **body})[2]["choices"][0]["message"]
            if (apart.get("reasoning_content", ""), apart["content"]) != split_r1(text):
                fail(f"{what}: {text!r} came apart as {apart!r}")
            if streamed(s, {**ASK, **body}) != split_r1(text):
                fail(f"{what}: streamed, {text!r} came apart as {streamed(s, {**ASK, **body})!r}")
            print(f"ok: {what}: the uncapped reply's first {n} tokens, the closer, then the answer {split_r1(text)[1]!r}")

        ollama = {"model": MODEL.stem, "messages": ASK["messages"], "stream": False, "think": True,
                  "options": {"temperature": 0, "num_predict": 40}}
        status, _, o = s.request("POST", "/api/chat", ollama)
        if status != 200 or o["message"].get("thinking") != first(12).strip():
            fail(f"Ollama's think under the server's budget: {status} {o}")
        print("ok: Ollama's think true reasons within the server's budget")

    env = dict(os.environ, STRATA_MODELS=str(MODEL.parent))
    chat = [STRATA_BIN, "chat", "-m", str(MODEL), "--chat-template", "deepseek-r1", "--temp", "0", "-n", "24", "-t", "2"]
    capped = subprocess.run(chat + ["--reasoning-budget", "0"], input="What is the capital of France?\n",
                            capture_output=True, text=True, env=env, timeout=300)
    uncapped = subprocess.run(chat, input="What is the capital of France?\n", capture_output=True, text=True, env=env,
                              timeout=300)
    if capped.returncode or not capped.stdout.startswith(CLOSER) or "</think>" in uncapped.stdout:
        fail(f"chat --reasoning-budget 0: {capped.stdout!r} {capped.stderr[-500:]}; without it {uncapped.stdout!r}")
    print(f"ok: chat --reasoning-budget 0 closes the reasoning at once: {capped.stdout!r}")


if __name__ == "__main__":
    main()
