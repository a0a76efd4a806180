#!/usr/bin/env python3
"""`strata serve`'s /v1/embeddings with the official `openai` client, and llama.cpp's token
endpoints: vectors of unit length, one per input in order, equal to the numpy reference's pooled
final hidden states for the same token ids (tests/fixtures/model/smollm2_embeddings.json) with
last-token pooling and, under --pooling mean, mean pooling; base64 the same floats; `strata embed`
prints the same answer (for -p texts, and for a file's CRLF lines); /tokenize and /detokenize round trip; with --host 0.0.0.0 and --api-key
every route but /health wants the key."""
from __future__ import annotations

import base64
import json
import math
import struct
import subprocess

from serve_support import Server, check_error_shape
from strata_support import SOURCE_DIR, STRATA_BIN, default_model, skip

try:
    import openai
except ImportError:
    skip("the openai package is missing (pip install openai)")

MODEL = default_model()
FIXTURE = json.loads((SOURCE_DIR / "tests" / "fixtures" / "model" / "smollm2_embeddings.json").read_text())


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def check_reference(client, pooling: str) -> None:
    ids = [case["ids"] for case in FIXTURE["cases"]]
    got = client.embeddings.create(model=MODEL.stem, input=ids)
    assert [d.index for d in got.data] == list(range(len(ids))), got
    assert got.usage.prompt_tokens == sum(len(i) for i in ids), got.usage
    for case, d in zip(FIXTURE["cases"], got.data):
        assert abs(math.fsum(v * v for v in d.embedding) - 1) < 1e-4
        c = cosine(d.embedding, case[pooling])
        assert c > 1 - 1e-5, (pooling, len(case["ids"]), c)
    print(f"ok: {pooling} pooling equals the reference on {len(ids)} inputs")


def check_default_server(server: Server) -> None:
    client = openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0)
    check_reference(client, "last")

    texts = ["The cat sat on the mat.", "Stock prices fell sharply.", "A kitten rested on a rug."]
    many = client.embeddings.create(model=MODEL.stem, input=texts)
    one = [client.embeddings.create(model=MODEL.stem, input=t).data[0].embedding for t in texts]
    assert [d.embedding for d in many.data] == one, "a batch gives each input the vector it gets alone"
    assert len(one[0]) == 576
    # The text's tokens (BOS/EOS by the model's rule, as /tokenize add_special) give the same vector.
    status, _, tok = server.request("POST", "/tokenize", {"content": texts[0], "add_special": True})
    assert status == 200, tok
    assert client.embeddings.create(model=MODEL.stem, input=tok["tokens"]).data[0].embedding == one[0]
    status, _, back = server.request("POST", "/detokenize", {"tokens": tok["tokens"]})
    assert status == 200 and back["content"].endswith(texts[0]), back
    status, _, pieces = server.request("POST", "/tokenize", {"content": "hello world", "with_pieces": True})
    assert "".join(p["piece"] for p in pieces["tokens"]) == "hello world", pieces

    b64 = client.embeddings.create(model=MODEL.stem, input=texts[0], encoding_format="base64")
    raw = base64.b64decode(b64.data[0].embedding) if isinstance(b64.data[0].embedding, str) else None
    vec = list(struct.unpack(f"<{len(raw) // 4}f", raw)) if raw else b64.data[0].embedding  # the client may decode it
    assert [round(v, 6) for v in vec] == [round(v, 6) for v in one[0]], "base64 holds the same floats"

    out = subprocess.run([STRATA_BIN, "embed", "-m", str(MODEL), "-p", texts[0], "-p", texts[1]], check=True,
                         capture_output=True, text=True, timeout=120).stdout
    cli = json.loads(out)
    assert [d["embedding"] for d in cli["data"]] == [one[0], one[1]], "strata embed prints the server's vectors"
    # Lines of a file written on Windows (CRLF), a blank one among them: the same vectors, the
    # blank line skipped and named.
    lines = subprocess.run([STRATA_BIN, "embed", "-m", str(MODEL), "-f", "/dev/stdin"], check=True, capture_output=True,
                           text=True, timeout=120, input=f"{texts[0]}\r\n\r\n{texts[1]}\r\n")
    assert [d["embedding"] for d in json.loads(lines.stdout)["data"]] == [one[0], one[1]], "CRLF lines embed as their text"
    assert "skipped 1 blank line (2)" in lines.stderr, lines.stderr

    for body, param in [({"input": []}, "input"), ({"input": "x", "dimensions": 10}, "dimensions"),
                        ({"input": "x", "encoding_format": "hex"}, "encoding_format"), ({"input": [[1, 10 ** 9]]}, "input")]:
        status, _, err = server.request("POST", "/v1/embeddings", body)
        check_error_shape(err, 400, status, param=param)
    print("ok: batches, token ids, base64, strata embed and the token endpoints")


def check_open_server() -> None:
    """Beyond loopback: --host 0.0.0.0 (reached here through 127.0.0.1) warns without a key;
    with one, every route but /health wants it."""
    with Server(MODEL, "--host", "0.0.0.0") as server:
        assert "0.0.0.0" in server.banner, server.banner
        assert server.request("GET", "/health")[0] == 200
        server.stop()
        assert "without an API key" in server.stderr(), server.stderr()
    key = "k3y"
    with Server(MODEL, "--host", "0.0.0.0", "--api-key", key) as server:
        auth = {"Authorization": f"Bearer {key}"}
        routes = [("POST", "/v1/embeddings", {"input": "hi"}), ("POST", "/tokenize", {"content": "hi"}),
                  ("POST", "/detokenize", {"tokens": [1]}), ("POST", "/apply-template", {"messages": [{"role": "user", "content": "hi"}]}),
                  ("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}),
                  ("GET", "/v1/models", None), ("GET", "/metrics", None)]
        for method, path, body in routes:
            status, _, err = server.request(method, path, body)
            check_error_shape(err, 401, status, code="invalid_api_key")
            status, _, ok = server.request(method, path, body, auth)
            assert status == 200, (path, status, ok)
        status, _, health = server.request("GET", "/health")
        assert status == 200 and health["status"] == "ok", health
        assert server.stop() == 0
    print("ok: --host 0.0.0.0 with --api-key guards every route but /health")


def main() -> None:
    with Server(MODEL) as server:
        check_default_server(server)
    with Server(MODEL, "--pooling", "mean") as server:
        check_reference(openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0), "mean")
    check_open_server()


if __name__ == "__main__":
    main()
