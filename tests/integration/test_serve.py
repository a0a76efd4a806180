#!/usr/bin/env python3
"""`strata serve` driven by the official `openai` client and by raw HTTP: chat and completions,
streamed and not, /v1/models; greedy answers equal `strata generate --temp 0` and each other;
n choices and log-probabilities, whole and streamed; every documented error (400, 401, 413, 503)
in OpenAI's shape; a client that leaves cancels its sequence; SIGTERM lets a streamed answer
finish and exits 0."""
from __future__ import annotations

import json
import signal
import subprocess
import time

from serve_support import Server, check_error_shape, sse_events
from strata_support import STRATA_BIN, default_model, skip

try:
    import openai
except ImportError:
    skip("the openai package is missing (pip install openai)")

MODEL = default_model()
MODEL_ID = MODEL.stem
CHAT = [{"role": "user", "content": "Name three colours of the rainbow."}]
PROMPT = "The three primary colours are"


def generate_greedy(prompt: str, n: int, stop: list[str] | None = None) -> str:
    cmd = [STRATA_BIN, "generate", "-m", str(MODEL), "-p", prompt, "-n", str(n), "--temp", "0", "--json"]
    for s in stop or []:
        cmd += ["--stop", s]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=120).stdout
    return json.loads(out)["text"]


def check_openai_client(server: Server) -> None:
    client = openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0)
    models = client.models.list()
    assert [m.id for m in models.data] == [MODEL_ID], models

    # Chat, whole and streamed: the same greedy reply, usage adding up.
    whole = client.chat.completions.create(model=MODEL_ID, messages=CHAT, max_tokens=24, temperature=0)
    assert whole.object == "chat.completion" and whole.model == MODEL_ID
    choice = whole.choices[0]
    assert choice.message.role == "assistant" and choice.message.content, whole
    assert choice.finish_reason in ("stop", "length"), whole
    u = whole.usage
    assert u.total_tokens == u.prompt_tokens + u.completion_tokens and 0 < u.completion_tokens <= 24, u
    assert (choice.finish_reason == "length") == (u.completion_tokens == 24), whole

    chunks = list(client.chat.completions.create(model=MODEL_ID, messages=CHAT, max_tokens=24, temperature=0,
                                                 stream=True, stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == choice.message.content, (text, choice.message.content)
    assert chunks[0].choices[0].delta.role == "assistant"
    finals = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finals == [choice.finish_reason], finals
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens == u.total_tokens, chunks[-1]
    # The chunks before it say "usage": null, as OpenAI's do (typed clients look for the field).
    assert all("usage" in c.model_fields_set and c.usage is None for c in chunks[:-1]), chunks[0]

    # A model the server does not have is not answered by another one.
    try:
        client.chat.completions.create(model="gpt-9-ultra", messages=CHAT, max_tokens=4)
        raise AssertionError("an unknown model was answered")
    except openai.NotFoundError as e:
        assert e.body["code"] == "model_not_found" and e.body["param"] == "model", e.body
    assert client.models.retrieve(MODEL_ID).id == MODEL_ID

    # Completions equal `strata generate --temp 0`, streamed or not, with and without stop strings.
    reference = generate_greedy(PROMPT, 20)
    done = client.completions.create(model=MODEL_ID, prompt=PROMPT, max_tokens=20, temperature=0)
    assert done.object == "text_completion"
    assert done.choices[0].text == reference, (done.choices[0].text, reference)
    streamed = "".join(c.choices[0].text for c in client.completions.create(
        model=MODEL_ID, prompt=PROMPT, max_tokens=20, temperature=0, stream=True))
    assert streamed == reference, (streamed, reference)
    words = reference.split()
    if len(words) >= 3:
        stop = " " + words[2]
        stopped = client.completions.create(model=MODEL_ID, prompt=PROMPT, max_tokens=20, temperature=0, stop=[stop, "zzz"])
        assert stopped.choices[0].text == generate_greedy(PROMPT, 20, [stop]), stopped
        assert stop not in stopped.choices[0].text and stopped.choices[0].finish_reason == "stop", stopped

    # A seeded sampled answer repeats; the client's own error type for a 400.
    a = client.completions.create(model=MODEL_ID, prompt=PROMPT, max_tokens=12, temperature=1.0, seed=42)
    b = client.completions.create(model=MODEL_ID, prompt=PROMPT, max_tokens=12, temperature=1.0, seed=42)
    assert a.choices[0].text == b.choices[0].text
    try:
        client.chat.completions.create(model=MODEL_ID, messages=CHAT, n=17)
        raise AssertionError("n=17 was accepted")
    except openai.BadRequestError as e:
        assert e.status_code == 400 and e.body["param"] == "n", e.body
    check_choices(client)
    check_logprobs(client)


def check_choices(client) -> None:
    """n choices: seeded ones repeat and differ from each other; greedy ones all equal the greedy
    answer; streamed, each choice's chunks add up to the whole answer's choice."""
    kw = dict(model=MODEL_ID, messages=CHAT, max_tokens=16, temperature=1.0, seed=7, n=3)
    first, again = client.chat.completions.create(**kw), client.chat.completions.create(**kw)
    texts = [c.message.content for c in first.choices]
    assert [c.index for c in first.choices] == [0, 1, 2], first
    assert texts == [c.message.content for c in again.choices], (texts, again)
    assert len(set(texts)) > 1, texts
    # Choice i is the request with seed + i on its own; the prompt is counted once.
    alone = [client.chat.completions.create(**{**kw, "n": 1, "seed": 7 + i}) for i in range(3)]
    assert [a.choices[0].message.content for a in alone] == texts, (alone, texts)
    assert first.usage.prompt_tokens == alone[0].usage.prompt_tokens, first.usage
    assert first.usage.completion_tokens == sum(a.usage.completion_tokens for a in alone), first.usage
    greedy = client.completions.create(model=MODEL_ID, prompt=PROMPT, max_tokens=12, temperature=0, n=2)
    assert greedy.choices[0].text == greedy.choices[1].text == generate_greedy(PROMPT, 12)
    streamed: dict[int, str] = {}
    finals: dict[int, str] = {}
    for chunk in client.chat.completions.create(**kw, stream=True):
        for c in chunk.choices:
            streamed[c.index] = streamed.get(c.index, "") + (c.delta.content or "")
            if c.finish_reason:
                finals[c.index] = c.finish_reason
    assert [streamed[i] for i in range(3)] == texts, (streamed, texts)
    assert sorted(finals) == [0, 1, 2], finals
    # ignore_eos generates past the end of the assistant's turn too: every token asked for.
    fixed = client.chat.completions.create(model=MODEL_ID, messages=CHAT, max_tokens=200, temperature=0,
                                           extra_body={"ignore_eos": True})
    assert fixed.usage.completion_tokens == 200 and fixed.choices[0].finish_reason == "length", fixed.usage


def check_logprobs(client) -> None:
    """Log-probabilities: one entry per generated token whose texts make up the answer, the
    chosen token the most likely one when greedy, top_logprobs as many as asked; the same
    streamed; the completions shape with text offsets."""
    whole = client.chat.completions.create(model=MODEL_ID, messages=CHAT, max_tokens=12, temperature=0, logprobs=True,
                                           top_logprobs=4)
    content = whole.choices[0].logprobs.content
    assert len(content) == whole.usage.completion_tokens, (len(content), whole.usage)
    assert "".join(t.token for t in content).startswith(whole.choices[0].message.content), whole
    for t in content:
        assert len(t.top_logprobs) == 4 and t.logprob <= 0
        assert t.top_logprobs[0].token == t.token and abs(t.top_logprobs[0].logprob - t.logprob) < 1e-6, t
        assert t.top_logprobs[0].logprob >= t.top_logprobs[1].logprob >= t.top_logprobs[3].logprob
        try:
            assert bytes(t.bytes).decode() == t.token, t
        except UnicodeDecodeError:
            pass  # part of a character: its text is replaced, its bytes are exact
    streamed = []
    for chunk in client.chat.completions.create(model=MODEL_ID, messages=CHAT, max_tokens=12, temperature=0, logprobs=True,
                                                top_logprobs=4, stream=True):
        if chunk.choices and chunk.choices[0].logprobs and chunk.choices[0].logprobs.content:
            streamed += chunk.choices[0].logprobs.content
    assert [(t.token, round(t.logprob, 5)) for t in streamed] == [(t.token, round(t.logprob, 5)) for t in content]
    text = client.completions.create(model=MODEL_ID, prompt=PROMPT, max_tokens=8, temperature=0, logprobs=2)
    lp = text.choices[0].logprobs
    assert "".join(lp.tokens) == text.choices[0].text, (lp.tokens, text.choices[0].text)
    assert lp.text_offset == [sum(len(t) for t in lp.tokens[:i]) for i in range(len(lp.tokens))], lp.text_offset  # characters
    assert all(len(top) == 2 and max(top.values()) == top[tok] for top, tok in zip(lp.top_logprobs, lp.tokens)), lp
    # A stop string's tokens are not reported (the text ends before it), whole or streamed.
    whole = client.completions.create(model=MODEL_ID, prompt=PROMPT, max_tokens=8, temperature=0, logprobs=1)
    cut_at = whole.choices[0].logprobs.tokens[4]
    stopped = client.completions.create(model=MODEL_ID, prompt=PROMPT, max_tokens=8, temperature=0, logprobs=1, stop=[cut_at])
    assert stopped.choices[0].finish_reason == "stop", stopped
    assert "".join(stopped.choices[0].logprobs.tokens) == stopped.choices[0].text, stopped.choices[0]
    parts = list(client.completions.create(model=MODEL_ID, prompt=PROMPT, max_tokens=8, temperature=0, logprobs=1,
                                           stop=[cut_at], stream=True))
    streamed_tokens = [t for p in parts if p.choices and p.choices[0].logprobs for t in p.choices[0].logprobs.tokens]
    assert streamed_tokens == stopped.choices[0].logprobs.tokens, (streamed_tokens, stopped.choices[0].logprobs.tokens)


def check_raw_errors(server: Server) -> None:
    status, _, body = server.request("POST", "/v1/chat/completions", b'{"messages": [')
    check_error_shape(body, 400, status, code="invalid_json")
    status, _, body = server.request("POST", "/v1/chat/completions", {"messages": CHAT, "temperature": "hot"})
    check_error_shape(body, 400, status, param="temperature")
    status, _, body = server.request("POST", "/v1/completions", {"prompt": 7})
    check_error_shape(body, 400, status, param="prompt")
    status, _, body = server.request("POST", "/v1/completions", {"prompt": "x" * (2 << 20)})  # over the 1 MiB default
    check_error_shape(body, 413, status, code="request_too_large")
    # curl -d sends application/x-www-form-urlencoded: a body of any such type up to --max-body is read.
    # The body is long with JSON's whitespace before its last fields, its prompt short (a long
    # prompt's prefill would time the CPU, not the reading): a body cut short is no JSON.
    long_body = '{"prompt": "The cat sat on the mat.",' + " " * 9000 + '"max_tokens": 1, "temperature": 0}'
    assert len(long_body) > 8192  # past what the HTTP library reads of a form by itself
    for content_type in ("application/x-www-form-urlencoded", "text/plain", "application/octet-stream"):
        status, _, body = server.request("POST", "/v1/completions", long_body, {"Content-Type": content_type})
        assert status == 200 and body["usage"]["completion_tokens"] == 1, (content_type, status, body)
    # Each answer priced by the plan for what it was: a longer prompt (none of it cached) is
    # predicted a longer prefill.
    short, long = (server.request("POST", "/v1/completions", {"prompt": p, "max_tokens": 2, "temperature": 0})[2]
                   for p in ("The cat", "A dog ran far away from home. " * 200))
    predicted = [b["usage"]["timings"]["predicted"] for b in (short, long)]
    assert all(p["prefill_seconds"] > 0 and p["decode_tokens_per_s"] > 0 for p in predicted), predicted
    assert predicted[1]["prefill_seconds"] > predicted[0]["prefill_seconds"], predicted
    status, _, body = server.request("POST", "/v1/completions", json.dumps({"prompt": "x" * (2 << 20)}),
                                     {"Content-Type": "application/x-www-form-urlencoded"})
    check_error_shape(body, 413, status, code="request_too_large")
    status, _, body = server.request("GET", "/v1/nothing")
    check_error_shape(body, 404, status)
    status, headers, body = server.request("GET", "/v1/embeddings")
    check_error_shape(body, 405, status)
    assert headers.get("Allow") == "POST, OPTIONS", headers
    status, _, body = server.request("GET", "/health")
    assert status == 200 and body["status"] == "ok", body
    status, _, text = server.request("GET", "/metrics")
    assert status == 200 and "strata_generated_tokens_total" in text and 'strata_memory_used_bytes{tier="dram"}' in text
    assert 'strata_http_responses_total{route="/v1/chat/completions",code="400"}' in text, text
    too_large = [l for l in text.splitlines() if l.startswith('strata_requests_rejected_total{reason="too_large"}')]
    assert too_large and float(too_large[0].split()[1]) >= 2, too_large  # both 413s above


def check_sigterm_finishes_stream(server: Server) -> None:
    """SIGTERM with a stream in flight: the stream ends normally, then the process exits 0."""
    conn = server.connection()
    conn.request("POST", "/v1/completions", body=json.dumps(
        {"prompt": PROMPT, "max_tokens": 48, "temperature": 0, "ignore_eos": True, "stream": True}),
        headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    events = sse_events(resp)
    first = json.loads(next(events))
    assert first["object"] == "text_completion"
    server.proc.send_signal(signal.SIGTERM)
    rest = list(events)
    assert rest[-1] == "[DONE]", rest[-3:]
    assert json.loads(rest[-2])["choices"][0]["finish_reason"] == "length", rest[-2]
    code = server.stop()
    assert code == 0, (code, server.stderr())


def check_limits_server() -> None:
    """A server with an API key, a 256-token context and room for exactly one request."""
    key = "s3cret-key"
    with Server(MODEL, "--ctx", "256", "--api-key", key, "--max-batch", "1", "--max-queue", "0") as server:
        auth = {"Authorization": f"Bearer {key}"}
        status, _, body = server.request("GET", "/v1/models")
        check_error_shape(body, 401, status, code="invalid_api_key")
        status, _, body = server.request("POST", "/v1/completions", {"prompt": "hi"}, {"Authorization": "Bearer wrong"})
        check_error_shape(body, 401, status, code="invalid_api_key")
        assert server.request("GET", "/health")[0] == 200  # health needs no key
        client = openai.OpenAI(base_url=server.base_url, api_key=key, max_retries=0)
        assert client.models.list().data[0].id == MODEL_ID
        try:
            openai.OpenAI(base_url=server.base_url, api_key="nope", max_retries=0).models.list()
            raise AssertionError("a wrong key was accepted")
        except openai.AuthenticationError:
            pass

        status, _, body = server.request("POST", "/v1/completions", {"prompt": "word " * 400}, auth)
        check_error_shape(body, 400, status, param="prompt", code="context_length_exceeded")
        status, _, body = server.request("POST", "/v1/completions", {"prompt": PROMPT, "max_tokens": 300}, auth)
        check_error_shape(body, 400, status, param="max_tokens", code="context_length_exceeded")

        # A long generation holds the only place: the next request gets 503 with Retry-After.
        conn = server.connection()
        conn.request("POST", "/v1/completions", body=json.dumps(
            {"prompt": PROMPT, "max_tokens": 200, "temperature": 0, "ignore_eos": True, "stream": True}),
            headers={"Content-Type": "application/json", **auth})
        resp = conn.getresponse()
        events = sse_events(resp)
        next(events)  # generating
        status, headers, body = server.request("POST", "/v1/completions", {"prompt": PROMPT, "max_tokens": 4}, auth)
        check_error_shape(body, 503, status, code="queue_full")
        assert int(headers.get("Retry-After", "0")) >= 1, headers

        # Hanging up cancels it: the place frees long before 200 tokens could be generated.
        conn.close()
        deadline = time.time() + 10
        while True:
            status, _, body = server.request("GET", "/health")
            if body["running"] == 0 and body["queued"] == 0:
                break
            assert time.time() < deadline, "the abandoned request kept running"
            time.sleep(0.05)
        _, _, metrics = server.request("GET", "/metrics", headers=auth)
        cancelled = [l for l in metrics.splitlines() if l.startswith("strata_requests_cancelled_total ")]
        assert cancelled and float(cancelled[0].split()[1]) >= 1, cancelled
        assert server.request("POST", "/v1/completions", {"prompt": PROMPT, "max_tokens": 4}, auth)[0] == 200
        assert server.stop() == 0, server.stderr()


def main() -> None:
    start = time.time()
    with Server(MODEL) as server:
        assert f"127.0.0.1:{server.port}" in server.banner, server.banner
        check_openai_client(server)
        check_raw_errors(server)
        check_sigterm_finishes_stream(server)
        assert "word" not in server.stderr() and "rainbow" not in server.stderr()  # prompts are never logged
    check_limits_server()
    print(f"ok ({time.time() - start:.1f} s)")


if __name__ == "__main__":
    main()
