#!/usr/bin/env python3
"""Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens) from `strata serve`,
with Anthropic's official `anthropic` client (its x-api-key sent to a server started with
--api-key), on SmolLM2-135M: each answer validates as the client's own `Message` model and says
what the chat endpoint says to the same conversation (greedy): the text, usage and stop reason;
streamed through the client's accumulator, the same message; max_tokens and a stop sequence end
it as Anthropic's API says (max_tokens, stop_sequence); a tool the model must use, and the
answer to its result; count_tokens counts the chat endpoint's prompt. Served with DeepSeek-R1's
template, `thinking` with a budget gives a thinking block cut as the chat endpoint's budget
cuts it. Refusals come in Anthropic's error shape (the client's typed errors)."""
from __future__ import annotations

import json

from serve_support import Server
from strata_support import default_model, skip

try:
    import anthropic
    from anthropic.types import Message
except ImportError as e:
    skip(f"{e.name} is missing (pip install -r scripts/requirements.txt)")

MODEL = default_model()
KEY = "test-key"
SYSTEM = "Answer in one sentence."
QUESTION = "What is the capital of France?"
WEATHER = {"name": "get_weather", "description": "The weather in a city",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}


def fail(msg: str) -> None:
    raise SystemExit(f"FAIL: {msg}")


def chat(server: Server, messages: list, **extra) -> dict:
    status, _, body = server.request("POST", "/v1/chat/completions",
                                     {"model": MODEL.stem, "messages": messages, "temperature": 0, **extra},
                                     headers={"Authorization": f"Bearer {KEY}"})
    if status != 200:
        fail(f"the chat endpoint: {status} {body}")
    return body


def text_of(m) -> str:
    return "".join(b.text for b in m.content if b.type == "text")


def main() -> None:
    with Server(MODEL, "--api-key", KEY, threads=2) as s:
        client = anthropic.Anthropic(base_url=f"http://127.0.0.1:{s.port}", api_key=KEY)
        # Greedy: temperature is an older client's field (newer ones send it as extra_body).
        ask = {"model": MODEL.stem, "max_tokens": 40, "system": SYSTEM, "extra_body": {"temperature": 0},
               "messages": [{"role": "user", "content": QUESTION}]}
        raw_ask = {**{k: v for k, v in ask.items() if k != "extra_body"}, "temperature": 0}
        status, _, raw = s.request("POST", "/v1/messages", raw_ask, headers={"x-api-key": KEY})
        if status != 200:
            fail(f"/v1/messages: {status} {raw}")
        m = Message.model_validate(raw)  # the client's model, every required field checked
        want = chat(s, [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}], max_tokens=40)
        usage = m.usage.input_tokens + (m.usage.cache_read_input_tokens or 0)
        if (text_of(m), usage, m.usage.output_tokens, m.stop_reason) != (
                want["choices"][0]["message"]["content"], want["usage"]["prompt_tokens"], want["usage"]["completion_tokens"],
                "end_turn" if want["choices"][0]["finish_reason"] == "stop" else "max_tokens"):
            fail(f"the message {m} is not the chat answer {want}")
        print(f"ok: a message says what the chat endpoint says: {text_of(m)!r} ({m.stop_reason})")

        with client.messages.stream(**ask) as stream:
            deltas = "".join(stream.text_stream)
            final = stream.get_final_message()
        if not (deltas == text_of(final) == text_of(m)) or final.stop_reason != m.stop_reason:
            fail(f"streamed: {deltas!r}, final {final}")
        print("ok: streamed through the client's accumulator, the same message")

        cut = client.messages.create(**{**ask, "max_tokens": 3})
        if cut.stop_reason != "max_tokens" or cut.usage.output_tokens != 3:
            fail(f"max_tokens 3: {cut}")
        words = text_of(m).split()
        stop = words[min(2, len(words) - 1)]
        stopped = client.messages.create(**{**ask, "stop_sequences": [stop]})
        if (stopped.stop_reason, stopped.stop_sequence, text_of(stopped)) != ("stop_sequence", stop, text_of(m)[:text_of(m).index(stop)]):
            fail(f"stop sequence {stop!r}: {stopped}")
        print(f"ok: max_tokens ends a message at max_tokens; the stop sequence {stop!r} at stop_sequence")

        question = [{"role": "user", "content": "What is the weather in Paris?"}]
        called = client.messages.create(model=MODEL.stem, max_tokens=60, extra_body={"temperature": 0}, messages=question, tools=[WEATHER],
                                        tool_choice={"type": "any", "disable_parallel_tool_use": True})
        uses = [b for b in called.content if b.type == "tool_use"]
        if called.stop_reason != "tool_use" or not uses or uses[0].name != "get_weather" or "city" not in uses[0].input:
            fail(f"a tool the model must use: {called}")
        answered = client.messages.create(
            model=MODEL.stem, max_tokens=30, extra_body={"temperature": 0}, tools=[WEATHER],
            messages=question + [{"role": "assistant", "content": [b.model_dump() for b in called.content]},
                                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": uses[0].id,
                                                               "content": "sunny, 24 C"}]}])
        want = chat(s, question + [{"role": "assistant", "content": text_of(called), "tool_calls": [
                        {"id": uses[0].id, "type": "function", "function": {"name": uses[0].name,
                                                                            "arguments": json.dumps(uses[0].input, separators=(",", ":"))}}]},
                                   {"role": "tool", "tool_call_id": uses[0].id, "content": "sunny, 24 C"}],
                    tools=[{"type": "function", "function": {"name": WEATHER["name"], "description": WEATHER["description"],
                                                             "parameters": WEATHER["input_schema"]}}], max_tokens=30)
        if text_of(answered) != (want["choices"][0]["message"]["content"] or ""):
            fail(f"the tool's result sent back: {answered}, the chat endpoint {want['choices'][0]['message']}")
        print(f"ok: a tool the model must use ({uses[0].input}), and its result sent back answers as the chat endpoint does")

        counted = client.messages.count_tokens(model=MODEL.stem, system=SYSTEM, messages=ask["messages"])
        if counted.input_tokens != usage:
            fail(f"count_tokens: {counted.input_tokens}, the prompt has {usage}")
        print(f"ok: count_tokens counts the prompt the chat endpoint reads ({usage})")

        try:
            client.messages.create(**{**ask, "messages": [{"role": "user", "content": [{"type": "image", "source": {
                "type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}]}]})
            fail("an image was accepted")
        except anthropic.BadRequestError as e:
            if e.body["error"]["type"] != "invalid_request_error":
                fail(f"an image: {e.body}")
        try:
            anthropic.Anthropic(base_url=f"http://127.0.0.1:{s.port}", api_key="wrong").messages.create(**ask)
            fail("a wrong key was accepted")
        except anthropic.AuthenticationError as e:
            if e.body["type"] != "error" or e.body["error"]["type"] != "authentication_error":
                fail(f"a wrong key: {e.body}")
        print("ok: an image and a wrong key are refused in Anthropic's error shape")

    with Server(MODEL, "--chat-template", "deepseek-r1", threads=2) as s:
        client = anthropic.Anthropic(base_url=f"http://127.0.0.1:{s.port}", api_key="none")
        m = client.messages.create(model=MODEL.stem, max_tokens=40, extra_body={"temperature": 0},
                                   messages=[{"role": "user", "content": QUESTION}],
                                   thinking={"type": "enabled", "budget_tokens": 6})
        status, _, want = s.request("POST", "/v1/chat/completions", {"model": MODEL.stem, "max_tokens": 40, "temperature": 0,
                                                                     "messages": [{"role": "user", "content": QUESTION}],
                                                                     "thinking_budget_tokens": 6})
        thinking = [b.thinking for b in m.content if b.type == "thinking"]
        if (thinking, text_of(m)) != ([want["choices"][0]["message"]["reasoning_content"]], want["choices"][0]["message"]["content"]):
            fail(f"thinking with a budget: {m}, the chat endpoint {want}")
        print(f"ok: thinking with budget_tokens 6 is a thinking block {thinking[0]!r}, cut as the chat endpoint cuts it")


if __name__ == "__main__":
    main()
