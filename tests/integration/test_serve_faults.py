#!/usr/bin/env python3
"""`strata serve` when the disk misbehaves: the model file truncated or rewritten under a
running server (resident weights keep answering; streamed layers fail the request with a
clear 500, never the process), injected read errors (STRATA_FAULT_IO) that fail one request
and no other, and the startup refusal, naming the way out, of a memory budget too small (a full
spill directory: test_serve_full_spill_dir.py)."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from serve_support import Server, check_error_shape
from strata_support import STRATA_BIN, default_model

MODEL = default_model()
ORDINARY = {"prompt": "Once upon a time", "max_tokens": 4, "temperature": 0}
# 28 of the 30 layers stream from the file; the KV cache of a 512-token context stays in DRAM.
STREAMING = ["--ctx", "512", "--dram", "72M", "-v"]


def ask(server: Server, body=None):
    return server.request("POST", "/v1/completions", body or ORDINARY, timeout=120)


def healthy(server: Server) -> None:
    assert server.proc.poll() is None, f"the server died:\n{server.stderr()[-3000:]}"
    status, _, body = server.request("GET", "/health")
    assert status == 200 and body["status"] == "ok", body


def streamed_layers(server: Server) -> int:
    """Layers the server streams, from its startup log line."""
    for line in server.stderr().splitlines():
        if "layers resident" in line and "streamed" in line:
            return int(line.split(" streamed from ")[0].split()[-1])
    return 0


def check_truncated_resident(tmp: Path) -> None:
    """Every layer resident: the weights were read into memory at load, so the file can go."""
    copy = tmp / "resident.gguf"
    shutil.copyfile(MODEL, copy)
    with Server(copy, threads=2) as server:
        status, _, first = ask(server)
        assert status == 200, first
        os.truncate(copy, os.path.getsize(copy) // 2)
        status, _, again = ask(server)
        assert status == 200 and again["choices"][0]["text"] == first["choices"][0]["text"], again
        os.truncate(copy, 0)
        copy.write_bytes(b"not a model any more")
        status, _, again = ask(server)
        assert status == 200 and again["choices"][0]["text"] == first["choices"][0]["text"], again
        healthy(server)
        assert server.stop() == 0, server.stderr()


def check_truncated_streamed(tmp: Path) -> None:
    """Layers streamed from the file: once it is cut short, each request fails with a 500 that
    says why, and the server stays up for /health, /metrics and a clean stop."""
    copy = tmp / "streamed.gguf"
    shutil.copyfile(MODEL, copy)
    with Server(copy, *STREAMING, threads=2) as server:
        assert streamed_layers(server) >= 10, server.stderr()
        status, _, first = ask(server)
        assert status == 200, first
        os.truncate(copy, os.path.getsize(copy) * 2 // 3)
        for _ in range(3):
            status, _, body = ask(server)
            check_error_shape(body, 500, status, code="generation_failed")
            assert "streamed.gguf" in body["error"]["message"], body
            healthy(server)
        # Streamed, the error arrives as the stream's last event before [DONE].
        conn = server.connection()
        conn.request("POST", "/v1/completions", body='{"prompt": "Hi", "max_tokens": 4, "stream": true}',
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        text = resp.read().decode()
        assert resp.status == 200 and '"error"' in text and "streamed.gguf" in text, text[-500:]
        assert server.request("GET", "/metrics")[0] == 200
        healthy(server)
        assert server.stop() == 0, server.stderr()


def check_replaced_streamed(tmp: Path) -> None:
    """Rewritten in place (same size, new bytes) the file is refused; renamed over, the old
    file stays open and answers go on unchanged."""
    copy = tmp / "replaced.gguf"
    shutil.copyfile(MODEL, copy)
    with Server(copy, *STREAMING, threads=2) as server:
        status, _, first = ask(server)
        assert status == 200, first
        fresh = tmp / "fresh.gguf"
        shutil.copyfile(MODEL, fresh)
        os.replace(fresh, copy)  # mv over: the server's descriptor keeps the old file
        status, _, again = ask(server)
        assert status == 200 and again["choices"][0]["text"] == first["choices"][0]["text"], again
    copy2 = tmp / "rewritten.gguf"
    shutil.copyfile(MODEL, copy2)
    with Server(copy2, *STREAMING, threads=2) as server:
        assert ask(server)[0] == 200
        time.sleep(0.01)
        with open(copy2, "r+b") as f:  # in place: a cp over the file does this
            data = f.read(1 << 20)
            f.seek(0)
            f.write(data)
        status, _, body = ask(server)
        check_error_shape(body, 500, status, code="generation_failed")
        assert "changed on disk" in body["error"]["message"], body
        healthy(server)
        assert server.stop() == 0, server.stderr()


def check_injected_io_errors() -> None:
    """STRATA_FAULT_IO=eio:N fails the request whose pass needed that read, with the reason;
    the requests after it work. short:N is absorbed (the rest of the read is reissued)."""
    old = os.environ.get("STRATA_FAULT_IO")
    try:
        os.environ["STRATA_FAULT_IO"] = "eio:300"
        with Server(MODEL, *STREAMING, threads=2) as server:
            statuses = []
            for _ in range(12):
                status, _, body = ask(server)
                statuses.append(status)
                if status != 200:
                    check_error_shape(body, 500, status, code="generation_failed")
                    assert "Input/output error" in body["error"]["message"], body
            assert statuses.count(500) == 1 and statuses[-1] == 200, statuses
            assert statuses.index(500) < 8, statuses
            healthy(server)
            assert server.stop() == 0, server.stderr()
        os.environ["STRATA_FAULT_IO"] = "short:300"
        with Server(MODEL, *STREAMING, threads=2) as server:
            texts = set()
            for _ in range(6):
                status, _, body = ask(server)
                assert status == 200, body
                texts.add(body["choices"][0]["text"])
            assert len(texts) == 1, texts  # greedy: the same answer, the short read made whole
            assert server.stop() == 0, server.stderr()
    finally:
        if old is None:
            os.environ.pop("STRATA_FAULT_IO", None)
        else:
            os.environ["STRATA_FAULT_IO"] = old


def serve_fails(*args: str) -> str:
    """Starts `strata serve` expecting it to refuse; returns its stderr."""
    proc = subprocess.run([STRATA_BIN, "serve", "-m", str(MODEL), "--port", "0", "-t", "2", *args],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0, (proc.returncode, proc.stdout, proc.stderr)
    assert "serving" not in proc.stdout, proc.stdout
    return proc.stderr


def check_budget_refused() -> None:
    err = serve_fails("--dram", "8M")
    assert "--dram" in err and "MiB" in err, err


def main() -> None:
    start = time.time()
    with tempfile.TemporaryDirectory(prefix="strata-faults-") as d:
        tmp = Path(d)
        for check in (check_truncated_resident, check_truncated_streamed, check_replaced_streamed):
            t0 = time.time()
            check(tmp)
            print(f"{check.__name__}: ok ({time.time() - t0:.1f} s)")
        t0 = time.time()
        check_injected_io_errors()
        print(f"check_injected_io_errors: ok ({time.time() - t0:.1f} s)")
        t0 = time.time()
        check_budget_refused()
        print(f"check_budget_refused: ok ({time.time() - t0:.1f} s)")
    print(f"ok ({time.time() - start:.1f} s)")


if __name__ == "__main__":
    main()
