#!/usr/bin/env python3
"""`strata serve` against hostile clients: malformed bytes, absurd numbers, deep nesting, huge
and unbounded bodies, floods of small requests, clients that send a byte a second or vanish
mid-answer, wrong keys, methods and paths. Each case checks the status and error shape, and
that the server still answers an ordinary request afterwards; at the end its descriptors are
back where they started and it is still running."""
from __future__ import annotations

import json
import os
import resource
import select
import socket
import struct
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from serve_support import Server, check_error_shape, sse_events
from strata_support import STRATA_BIN, default_model, free_port, tiny_llama

MODEL = default_model()
TIMEOUT_S = 3  # the server's --timeout: slow clients are cut after this
ORDINARY = {"prompt": "Once upon a time", "max_tokens": 2, "temperature": 0}


def fd_count(server: Server) -> int:
    return len(os.listdir(f"/proc/{server.proc.pid}/fd"))


def rss_kib(server: Server) -> int:
    with open(f"/proc/{server.proc.pid}/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))


def still_serving(server: Server, case: str) -> None:
    assert server.proc.poll() is None, f"{case}: the server died:\n{server.stderr()[-3000:]}"
    status, _, body = server.request("POST", "/v1/completions", ORDINARY, timeout=60)
    assert status == 200 and body["choices"][0]["text"], (case, status, body)


def raw_exchange(server: Server, data: bytes, timeout: float = 30) -> bytes:
    """Sends `data` on a fresh connection and returns everything the server answers until it closes."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=timeout) as s:
        try:
            s.sendall(data)
        except OSError:  # answered and closed before all of it was sent
            pass
        out = b""
        while True:
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not chunk:
                break
            out += chunk
        return out


def status_of(raw: bytes) -> int:
    return int(raw.split(b" ", 2)[1]) if raw.startswith(b"HTTP/1.1 ") else 0


def body_of(raw: bytes):
    return json.loads(raw.split(b"\r\n\r\n", 1)[1])


def post_raw(path: str, body: bytes, extra: str = "") -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nConnection: close\r\n"
            f"Content-Length: {len(body)}\r\n{extra}\r\n").encode() + body


def check_bad_bytes(server: Server) -> None:
    """Ill-formed UTF-8 anywhere in the body is malformed JSON (RFC 8259): 400, never a crash."""
    cases = {
        "invalid UTF-8 after the JSON": b'{"prompt": "hi"}\xff',
        "invalid UTF-8 in message content": b'{"messages": [{"role": "user", "content": "caf\xc3\x28 \xff\xfe"}]}',
        "overlong encoding in a prompt": b'{"prompt": "\xc0\xaf"}',
        "truncated multibyte sequence": b'{"prompt": "\xe2\x82"}',
        "lone surrogate escape": b'{"prompt": "\\ud800"}',
        "UTF-16 body": '{"prompt": "hi"}'.encode("utf-16"),
        "NUL byte outside a string": b'{"prompt": "hi"}\x00',
    }
    for name, body in cases.items():
        endpoint = "/v1/chat/completions" if b"messages" in body else "/v1/completions"
        status, _, reply = server.request("POST", endpoint, body)
        check_error_shape(reply, 400, status, code="invalid_json")
        assert "\ufffd" not in reply["error"]["message"], (name, reply)  # the offending bytes are not echoed
        still_serving(server, name)
    # Well-formed but unusual text is accepted: an escaped NUL, astral characters, control codes.
    for text in ["a\u0000b", "\U0001F600 \u202e \u0007", "\ud83d\ude00"]:
        status, _, reply = server.request("POST", "/v1/chat/completions", {
            "messages": [{"role": "user", "content": text}], "max_tokens": 2, "temperature": 0})
        assert status == 200, (text, status, reply)
    still_serving(server, "unusual text")


def check_numbers(server: Server) -> None:
    base = {"prompt": "Hi", "max_tokens": 2}
    bad = [  # (raw JSON fragment for one field, the field reported, or None for malformed JSON)
        ('"max_tokens": 1e309', None),                    # overflows a double: not a JSON number we can hold
        ('"max_tokens": 18446744073709551616', "max_tokens"),  # 2^64
        ('"max_tokens": 18446744073709551615', "max_tokens"),  # 2^64 - 1
        ('"max_tokens": 9223372036854775808', "max_tokens"),   # 2^63
        ('"max_tokens": -1', "max_tokens"),
        ('"max_tokens": 0', "max_tokens"),
        ('"max_tokens": 2.5', "max_tokens"),
        ('"max_tokens": -1e309', None),
        ('"temperature": -0.1', "temperature"),
        ('"temperature": 1e308', "temperature"),
        ('"temperature": 2.0000001', "temperature"),
        ('"top_p": -1', "top_p"),
        ('"top_p": 1e300', "top_p"),
        ('"top_p": 1.5', "top_p"),
        ('"top_k": -3', "top_k"),
        ('"presence_penalty": -1e30', "presence_penalty"),
        ('"seed": 1.5', "seed"),
        ('"max_tokens": NaN', None),
        ('"temperature": Infinity', None),
    ]
    for fragment, param in bad:
        body = ('{"prompt": "Hi", ' + fragment + "}").encode()
        status, _, reply = server.request("POST", "/v1/completions", body)
        if param is None:
            check_error_shape(reply, 400, status, code="invalid_json")
        else:
            check_error_shape(reply, 400, status, param=param)
    status, _, reply = server.request("POST", "/v1/completions", {**base, "max_tokens": 10**12})
    check_error_shape(reply, 400, status, param="max_tokens", code="context_length_exceeded")
    status, _, reply = server.request("POST", "/v1/chat/completions", {
        "messages": [{"role": "user", "content": "Hi"}], "max_completion_tokens": 10**15})
    check_error_shape(reply, 400, status, param="max_tokens", code="context_length_exceeded")
    # Extreme but valid values are accepted and bounded.
    for extra in [{"top_k": 10**12}, {"seed": 2**64 - 1}, {"seed": -(2**63)}, {"temperature": 2, "top_p": 0},
                  {"temperature": 0, "min_p": 1}, {"repeat_penalty": 10}, {"presence_penalty": 2}]:
        status, _, reply = server.request("POST", "/v1/completions", {**base, **extra})
        assert status == 200, (extra, status, reply)
    still_serving(server, "numbers")


def check_nesting(server: Server) -> None:
    """Deeply nested JSON is refused before anything recurses into it."""
    deep = 100_000
    cases = {
        "100000 nested arrays": b"[" * deep + b"]" * deep,
        "100000 nested objects": b'{"a":' * deep + b"1" + b"}" * deep,
        "deep prompt": b'{"prompt": ' + b"[" * deep + b"]" * deep + b"}",
        "deep model name": b'{"model": ' + b"[" * 1000 + b"]" * 1000 + b', "prompt": "hi"}',  # printed in the error
        "deep stop list": b'{"prompt": "hi", "stop": [' + b"[" * 5000 + b"]" * 5000 + b"]}",
        "unclosed nesting": b"[" * deep,
    }
    for name, body in cases.items():
        status, _, reply = server.request("POST", "/v1/completions", body)
        check_error_shape(reply, 400, status, code="invalid_json")
        still_serving(server, name)
    ok = {"prompt": "hi", "max_tokens": 1, "metadata": json.loads("[" * 60 + "]" * 60)}  # within the limit
    status, _, reply = server.request("POST", "/v1/completions", ok)
    assert status == 200, reply


def check_bodies(server: Server) -> None:
    """Bodies over --max-body get 413 without being held in memory; bodies without a length, 411."""
    rss0 = rss_kib(server)
    huge = b'{"prompt": "' + b"x" * (10 << 20) + b'"}'
    status, _, reply = server.request("POST", "/v1/completions", huge)
    check_error_shape(reply, 413, status, code="request_too_large")
    still_serving(server, "10 MB body")
    # A Content-Length far beyond what is sent: refused at once from the header.
    raw = raw_exchange(server, post_raw("/v1/completions", b"{", extra="").replace(b"Content-Length: 1",
                                                                                  b"Content-Length: 99999999999"))
    assert status_of(raw) == 413, raw[:300]
    # Chunked or unbounded bodies would be read whole whatever --max-body says: refused.
    chunk = b"x" * 65536
    chunked = (b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n"
               + (b"%x\r\n" % len(chunk) + chunk + b"\r\n") * 160 + b"0\r\n\r\n")  # 10 MiB
    raw = raw_exchange(server, chunked)
    assert status_of(raw) == 411, raw[:300]
    check_error_shape(body_of(raw), 411, 411, code="length_required")
    raw = raw_exchange(server, b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" + b'{"prompt": "hi"}')
    assert status_of(raw) == 411, raw[:300]
    still_serving(server, "chunked body")
    grown = rss_kib(server) - rss0
    assert grown < 8 << 10, f"RSS grew by {grown} KiB while refusing 10 MiB bodies"


def check_flood(server: Server) -> None:
    """2000 small requests from 32 threads: nothing but 200 and 503 (queue full), no descriptor left behind."""
    fds0 = fd_count(server)
    statuses: dict[int, int] = {}
    lock = threading.Lock()

    def one(i: int) -> None:
        if i % 20 == 0:
            status = server.request("POST", "/v1/completions", {"prompt": f"Number {i}", "max_tokens": 1}, timeout=60)[0]
        else:
            status = server.request("GET", "/health" if i % 2 else "/v1/models", timeout=60)[0]
        with lock:
            statuses[status] = statuses.get(status, 0) + 1

    t0 = time.time()
    with ThreadPoolExecutor(32) as pool:
        list(pool.map(one, range(2000)))
    took = time.time() - t0
    assert set(statuses) <= {200, 503} and statuses.get(200, 0) >= 1900, statuses
    deadline = time.time() + 15
    while fd_count(server) > fds0 and time.time() < deadline:
        time.sleep(0.2)
    assert fd_count(server) <= fds0, (fds0, fd_count(server))
    still_serving(server, "flood")
    print(f"  flood: 2000 requests in {took:.1f} s, {statuses}, descriptors {fds0} -> {fd_count(server)}")


def check_slow_clients(server: Server) -> None:
    """Clients sending a byte a second are cut after --timeout; others are served meanwhile."""
    results: dict[str, tuple[float, bytes]] = {}

    def trickle(name: str, head: bytes, drip: bytes) -> None:
        t0 = time.time()
        with socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT_S + 10) as s:
            s.sendall(head)
            answer = b""
            try:
                for b in drip:
                    s.sendall(bytes([b]))
                    if select.select([s], [], [], 1.0)[0]:  # the server answered or closed
                        break
                while chunk := s.recv(65536):
                    answer += chunk
            except OSError:  # reset: cut off without (the rest of) an answer
                pass
        results[name] = (time.time() - t0, answer)

    body = json.dumps(ORDINARY).encode()
    slow = [
        ("headers", b"POST /v1/completions HTTP/1.1\r\n", b"Host: 127.0.0.1\r\nContent-Type: application/json\r\n" * 3),
        ("body", f"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(body)}\r\n\r\n".encode(), body),
        ("request line", b"", b"POST /v1/completions HTTP/1.1\r\n"),
    ]
    threads = [threading.Thread(target=trickle, args=s) for s in slow]
    for t in threads:
        t.start()
    time.sleep(0.5)
    for _ in range(3):  # served while the slow ones hold their connections
        t0 = time.time()
        still_serving(server, "slow clients")
        assert time.time() - t0 < 10
    for t in threads:
        t.join()
    for name, (took, answer) in results.items():
        assert took < TIMEOUT_S + 4, (name, took)  # cut by the server, not by the trickle running out
        if answer:
            assert status_of(answer) == 408, (name, answer[:300])
            check_error_shape(body_of(answer), 408, 408, code="request_timeout")
    assert any(answer for _, answer in results.values()), results  # headers and body get a 408
    still_serving(server, "slow clients")


def running_and_queued(server: Server) -> tuple[int, int]:
    _, _, body = server.request("GET", "/health")
    return body["running"], body["queued"]


def cancelled_total(server: Server) -> float:
    _, _, text = server.request("GET", "/metrics")
    return float(next(l.split()[1] for l in text.splitlines() if l.startswith("strata_requests_cancelled_total ")))


def check_vanishing_clients(server: Server) -> None:
    """A client that resets its connection mid-stream, or before a whole answer, is cancelled."""
    before = cancelled_total(server)
    long = {"prompt": "Once upon a time", "max_tokens": 400, "temperature": 0, "ignore_eos": True}
    for stream in (True, False):
        s = socket.create_connection(("127.0.0.1", server.port), timeout=30)
        s.sendall(post_raw("/v1/completions", json.dumps({**long, "stream": stream}).encode()))
        if stream:
            got = b""
            while b"data: " not in got:  # generating
                chunk = s.recv(65536)
                assert chunk, got
                got += chunk
        else:
            deadline = time.time() + 10
            while running_and_queued(server) == (0, 0) and time.time() < deadline:
                time.sleep(0.02)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close with a reset
        s.close()
        deadline = time.time() + 10
        while running_and_queued(server) != (0, 0):
            assert time.time() < deadline, f"stream={stream}: the abandoned request kept running"
            time.sleep(0.05)
    assert cancelled_total(server) >= before + 2
    still_serving(server, "vanished clients")


def check_methods_and_paths(server: Server) -> None:
    for method, path, status in [("GET", "/v1/chat/completions", 405), ("DELETE", "/v1/models", 405),
                                 ("POST", "/health", 405), ("PUT", "/v1/completions", 405),
                                 ("GET", "/v1/embeddings", 405), ("GET", "/tokenize", 405), ("POST", "/v1/files", 404),
                                 ("GET", "/../../etc/passwd", 404), ("GET", "/v1/models/../../etc/passwd", 404)]:
        got, headers, reply = server.request(method, path, b"{}" if method in ("POST", "PUT", "DELETE") else None)
        check_error_shape(reply, status, got)
        if status == 405:
            assert headers.get("Allow") in ("GET, HEAD, OPTIONS", "POST, OPTIONS"), headers
    for name, data in [("unknown method", b"BREW /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"),
                       ("garbage request line", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n"),
                       ("header too long", b"GET /health HTTP/1.1\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n"),
                       ("URI too long", b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\n\r\n")]:
        raw = raw_exchange(server, data)
        assert status_of(raw) in (0, 400, 404, 405, 414), (name, raw[:300])
        if raw:
            check_error_shape(body_of(raw), status_of(raw), status_of(raw))
    # Two pipelined requests on one connection get two answers, in order.
    raw = raw_exchange(server, b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                               b"Connection: close\r\n\r\n")
    assert raw.count(b"HTTP/1.1 200") == 2 and b'"object":"list"' in raw, raw[:600]
    still_serving(server, "methods and paths")


def check_browser_guards(server: Server) -> None:
    """What a web page could make a browser send: a plain-text POST from another origin (no
    preflight) is refused before it runs, the server's own page is not; a Host name re-pointed at
    127.0.0.1 (DNS rebinding) is refused; a GET's body is refused rather than read as the next
    request on the connection."""
    own = f"http://127.0.0.1:{server.port}"
    for origin, status in [("http://evil.example", 403), ("null", 403), (own, 200)]:
        got, _, reply = server.request("POST", "/v1/completions", json.dumps(ORDINARY),
                                       {"Origin": origin, "Content-Type": "text/plain"})
        if status == 403:
            check_error_shape(reply, 403, got, code="origin_not_allowed")
        else:
            assert got == 200 and reply["choices"][0]["text"], (origin, got, reply)
    got, _, reply = server.request("GET", "/v1/models", headers={"Host": f"attacker.example:{server.port}"})
    check_error_shape(reply, 403, got, code="host_not_allowed")
    assert "--allow-host" in reply["error"]["message"], reply
    assert server.request("GET", "/v1/models", headers={"Host": f"localhost:{server.port}"})[0] == 200
    smuggled = b"GET /v1/models/nope HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    raw = raw_exchange(server, b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: "
                       + str(len(smuggled)).encode() + b"\r\n\r\n" + smuggled)
    assert raw.count(b"HTTP/1.1 ") == 1 and status_of(raw) == 400, raw[:600]
    check_error_shape(body_of(raw), 400, 400, code="unexpected_body")
    still_serving(server, "browser guards")


def check_api_key() -> None:
    key = "k3y-" + "x" * 28
    with Server(MODEL, "--api-key", key, "--timeout", str(TIMEOUT_S)) as server:
        for name, header in [("none", None), ("wrong", "Bearer " + "y" * len(key)), ("prefix", "Bearer " + key[:-1]),
                             ("longer", "Bearer " + key + "x"), ("basic", "Basic " + key), ("empty", "Bearer "),
                             ("scheme only", "Bearer")]:
            headers = {"Authorization": header} if header else {}
            status, h, reply = server.request("POST", "/v1/completions", ORDINARY, headers)
            check_error_shape(reply, 401, status, code="invalid_api_key")
            assert h.get("WWW-Authenticate") == "Bearer", h
        # The refused body was never read: the connection closes rather than mistake it for a request.
        conn = server.connection()
        conn.request("POST", "/v1/completions", body=json.dumps(ORDINARY), headers={"Authorization": "Bearer no"})
        resp = conn.getresponse()
        assert resp.status == 401 and resp.getheader("Connection") == "close", resp.getheaders()
        resp.read()
        conn.request("POST", "/v1/completions", body=json.dumps(ORDINARY), headers={"Authorization": "bearer " + key})
        resp = conn.getresponse()
        assert resp.status == 200, (resp.status, resp.read())
        assert server.request("GET", "/health")[0] == 200  # no key needed
        assert server.request("GET", "/metrics")[0] == 401
        assert server.stop() == 0, server.stderr()


def check_too_many_threads() -> None:
    """Worker threads the system will not start (its address space held to 3 GB here): a named
    error and exit 1, not an abort with threads left running."""
    def small_address_space() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
    r = subprocess.run([STRATA_BIN, "serve", "-m", str(tiny_llama()), "--port", str(free_port()), "--http-threads", "2000"],
                       capture_output=True, text=True, timeout=120, preexec_fn=small_address_space)
    assert r.returncode == 1 and "would not start 2000 worker threads" in r.stderr and "--http-threads" in r.stderr, \
        (r.returncode, r.stderr[-2000:])


def main() -> None:
    start = time.time()
    with Server(MODEL, "--timeout", str(TIMEOUT_S), "--max-batch", "4", "--max-queue", "8", threads=2) as server:
        fds0 = fd_count(server)
        for check in (check_bad_bytes, check_numbers, check_nesting, check_bodies, check_methods_and_paths, check_browser_guards,
                      check_vanishing_clients, check_slow_clients, check_flood):
            t0 = time.time()
            check(server)
            print(f"{check.__name__}: ok ({time.time() - t0:.1f} s)")
        deadline = time.time() + 10
        while fd_count(server) > fds0 and time.time() < deadline:
            time.sleep(0.2)
        assert fd_count(server) <= fds0, (fds0, fd_count(server))
        assert server.stop() == 0, server.stderr()
        log = server.stderr()
        assert "Once upon a time" not in log and "Number 1" not in log, log[-2000:]  # prompts are never logged
    check_api_key()
    check_too_many_threads()
    print(f"ok ({time.time() - start:.1f} s)")


if __name__ == "__main__":
    main()
