#!/usr/bin/env python3
"""`strata serve` driven by the official `openai` client and by raw HTTP: chat and completions,
streamed and not, /v1/models; greedy answers equal `strata generate --temp 0` and each other;
every documented error (400, 401, 413, 429) in OpenAI's shape; a client that leaves cancels its
sequence; SIGTERM lets a streamed answer finish and exits 0."""
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
    whole = client.chat.completions.create(model="anything", messages=CHAT, max_tokens=24, temperature=0)
    assert whole.object == "chat.completion" and whole.model == "anything"  # echoed
    choice = whole.choices[0]
    assert choice.message.role == "assistant" and choice.message.content, whole
    assert choice.finish_reason in ("stop", "length"), whole
    u = whole.usage
    assert u.total_tokens == u.prompt_tokens + u.completion_tokens and 0 < u.completion_tokens <= 24, u
    assert (choice.finish_reason == "length") == (u.completion_tokens == 24), whole

    chunks = list(client.chat.completions.create(model="anything", messages=CHAT, max_tokens=24, temperature=0,
                                                 stream=True, stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == choice.message.content, (text, choice.message.content)
    assert chunks[0].choices[0].delta.role == "assistant"
    finals = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finals == [choice.finish_reason], finals
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens == u.total_tokens, chunks[-1]

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
        client.chat.completions.create(model=MODEL_ID, messages=CHAT, n=2)
        raise AssertionError("n=2 was accepted")
    except openai.BadRequestError as e:
        assert e.status_code == 400 and e.body["param"] == "n", e.body


def check_raw_errors(server: Server) -> None:
    status, _, body = server.request("POST", "/v1/chat/completions", b'{"messages": [')
    check_error_shape(body, 400, status, code="invalid_json")
    status, _, body = server.request("POST", "/v1/chat/completions", {"messages": CHAT, "temperature": "hot"})
    check_error_shape(body, 400, status, param="temperature")
    status, _, body = server.request("POST", "/v1/completions", {"prompt": 7})
    check_error_shape(body, 400, status, param="prompt")
    status, _, body = server.request("POST", "/v1/completions", {"prompt": "x" * (2 << 20)})  # over the 1 MiB default
    check_error_shape(body, 413, status, code="request_too_large")
    status, _, body = server.request("GET", "/v1/embeddings")
    check_error_shape(body, 404, status)
    status, _, body = server.request("GET", "/health")
    assert status == 200 and body["status"] == "ok", body
    status, _, text = server.request("GET", "/metrics")
    assert status == 200 and "strata_generated_tokens_total" in text and 'strata_memory_used_bytes{tier="dram"}' in text
    assert 'strata_http_responses_total{route="/v1/chat/completions",code="400"}' in text, text


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

        # A long generation holds the only place: the next request gets 429 with Retry-After.
        conn = server.connection()
        conn.request("POST", "/v1/completions", body=json.dumps(
            {"prompt": PROMPT, "max_tokens": 200, "temperature": 0, "ignore_eos": True, "stream": True}),
            headers={"Content-Type": "application/json", **auth})
        resp = conn.getresponse()
        events = sse_events(resp)
        next(events)  # generating
        status, headers, body = server.request("POST", "/v1/completions", {"prompt": PROMPT, "max_tokens": 4}, auth)
        check_error_shape(body, 429, status, code="queue_full")
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
