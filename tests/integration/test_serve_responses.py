#!/usr/bin/env python3
"""OpenAI's Responses API (POST /v1/responses) from `strata serve`, with the official `openai`
client, on SmolLM2-135M: each answer validates as the client's own `Response` model, and says
what the chat endpoint says to the same conversation (greedy): the text and its usage, a
required call and the answer to its output, a JSON schema held, an answer cut at
max_output_tokens (incomplete); streamed through the client's event accumulator (which checks
each item's identity from added to done), the deltas add up to the same response. Served with
DeepSeek-R1's template, the reasoning is a reasoning item, as the chat endpoint's
reasoning_content, whole and streamed. A request for what a server that stores nothing cannot give is a 400
naming the field."""
from __future__ import annotations

import json

from serve_support import Server
from strata_support import default_model, skip

try:
    import openai
    from openai.types.responses import Response
except ImportError as e:
    skip(f"{e.name} is missing (pip install -r scripts/requirements.txt)")

MODEL = default_model()
QUESTION = "What is the capital of France?"
WEATHER = {"type": "function", "name": "get_weather", "description": "The weather in a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}


def fail(msg: str) -> None:
    raise SystemExit(f"FAIL: {msg}")


def chat(server: Server, messages: list, **extra) -> dict:
    status, _, body = server.request("POST", "/v1/chat/completions", {"model": MODEL.stem, "messages": messages,
                                                                       "temperature": 0, **extra})
    if status != 200:
        fail(f"the chat endpoint: {status} {body}")
    return body


def respond(server: Server, **fields) -> Response:
    status, _, body = server.request("POST", "/v1/responses", {"model": MODEL.stem, "temperature": 0, **fields})
    if status != 200:
        fail(f"/v1/responses {fields}: {status} {body}")
    return Response.model_validate(body)  # the client's model, every required field checked


def main() -> None:
    with Server(MODEL, threads=2) as s:
        client = openai.OpenAI(base_url=s.base_url, api_key="none")
        r = respond(s, instructions="Answer in one sentence.", input=QUESTION, max_output_tokens=40)
        want = chat(s, [{"role": "system", "content": "Answer in one sentence."}, {"role": "user", "content": QUESTION}],
                    max_tokens=40)
        if (r.output_text, r.usage.input_tokens, r.usage.output_tokens) != (
                want["choices"][0]["message"]["content"], want["usage"]["prompt_tokens"], want["usage"]["completion_tokens"]):
            fail(f"the response {r.output_text!r} {r.usage} is not the chat answer {want}")
        print(f"ok: a response says what the chat endpoint says: {r.output_text!r}, {r.usage.input_tokens} tokens in")

        deltas = ""
        with client.responses.stream(model=MODEL.stem, instructions="Answer in one sentence.", input=QUESTION,
                                     max_output_tokens=40, temperature=0) as stream:
            for event in stream:
                if event.type == "response.output_text.delta":
                    deltas += event.delta
            final = stream.get_final_response()
        if not (deltas == final.output_text == r.output_text) or final.status != "completed":
            fail(f"streamed: deltas {deltas!r}, final {final.output_text!r} ({final.status}), whole {r.output_text!r}")
        print("ok: streamed, the client's accumulator takes every event, and the deltas add up to the same answer")

        cut = respond(s, input=QUESTION, max_output_tokens=3)
        if cut.status != "incomplete" or cut.incomplete_details.reason != "max_output_tokens" or cut.usage.output_tokens != 3:
            fail(f"max_output_tokens 3: {cut}")
        print(f"ok: an answer cut at max_output_tokens is incomplete: {cut.output_text!r}")

        called = respond(s, input="What is the weather in Paris?", tools=[WEATHER], tool_choice="required",
                         max_output_tokens=60)
        calls = [item for item in called.output if item.type == "function_call"]
        if not calls or calls[0].name != "get_weather" or "city" not in json.loads(calls[0].arguments):
            fail(f"a required call: {called.output}")
        conversation = [{"role": "user", "content": "What is the weather in Paris?"},
                        {"type": "function_call", "call_id": calls[0].call_id, "name": calls[0].name,
                         "arguments": calls[0].arguments},
                        {"type": "function_call_output", "call_id": calls[0].call_id, "output": "sunny, 24 C"}]
        answered = respond(s, input=conversation, tools=[WEATHER], max_output_tokens=30)
        want = chat(s, [{"role": "user", "content": "What is the weather in Paris?"},
                        {"role": "assistant", "content": "", "tool_calls": [{"id": calls[0].call_id, "type": "function", "function": {
                            "name": calls[0].name, "arguments": calls[0].arguments}}]},
                        {"role": "tool", "tool_call_id": calls[0].call_id, "content": "sunny, 24 C"}],
                    tools=[{"type": "function", "function": {k: v for k, v in WEATHER.items() if k != "type"}}], max_tokens=30)
        got_calls = [(i.name, i.arguments) for i in answered.output if i.type == "function_call"]
        want_calls = [(c["function"]["name"], c["function"]["arguments"]) for c in want["choices"][0]["message"].get("tool_calls") or []]
        if (answered.output_text, got_calls) != (want["choices"][0]["message"]["content"] or "", want_calls):
            fail(f"the call's output sent back: {answered.output}, the chat endpoint {want['choices'][0]['message']}")
        print(f"ok: a required call {calls[0].arguments}, and its output sent back answers as the chat endpoint does")

        schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}}, "required": ["city"],
                  "additionalProperties": False}
        held = respond(s, input=QUESTION, max_output_tokens=40,
                       text={"format": {"type": "json_schema", "name": "answer", "schema": schema, "strict": True}})
        if not isinstance(json.loads(held.output_text).get("city"), str):
            fail(f"a JSON schema: {held.output_text!r}")
        print(f"ok: text.format's schema holds the answer: {held.output_text}")

        for body, param in [({"previous_response_id": "resp_1"}, "previous_response_id"),
                            ({"tools": [{"type": "web_search"}]}, "tools[0]"),
                            ({"max_output_tokens": 10 ** 7}, "max_output_tokens")]:
            status, _, err = s.request("POST", "/v1/responses", {"model": MODEL.stem, "input": QUESTION, **body})
            if status != 400 or err["error"]["param"] != param:
                fail(f"{body}: {status} {err}")
        print("ok: a stored response, a built-in tool and a reply past the context are 400s naming the field")

    with Server(MODEL, "--chat-template", "deepseek-r1", "--reasoning-budget", "10", threads=2) as s:
        r = respond(s, input=QUESTION, max_output_tokens=40)
        want = chat(s, [{"role": "user", "content": QUESTION}], max_tokens=40)["choices"][0]["message"]
        reasoning = [c.text for item in r.output if item.type == "reasoning" for c in item.content or []]
        if (reasoning, r.output_text) != ([want["reasoning_content"]], want["content"]) or r.usage.output_tokens_details.reasoning_tokens < 1:
            fail(f"DeepSeek-R1's reasoning: {r.output}, the chat endpoint {want}")
        client = openai.OpenAI(base_url=s.base_url, api_key="none")
        deltas = ""
        with client.responses.stream(model=MODEL.stem, input=QUESTION, max_output_tokens=40, temperature=0) as stream:
            for event in stream:
                if event.type == "response.reasoning_text.delta":
                    deltas += event.delta
            final = stream.get_final_response()
        streamed = [c.text for item in final.output if item.type == "reasoning" for c in item.content or []]
        if (streamed, final.output_text) != (reasoning, r.output_text) or deltas != reasoning[0]:
            fail(f"DeepSeek-R1's reasoning streamed: {final.output}, deltas {deltas!r}")
        print(f"ok: the reasoning is a reasoning item: {reasoning[0]!r}, then the answer {r.output_text!r}, whole and streamed")


if __name__ == "__main__":
    main()
