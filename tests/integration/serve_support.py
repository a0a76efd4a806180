"""Starting `strata serve` for the integration tests and talking to it over raw HTTP."""
from __future__ import annotations

import http.client
import json
import signal
import subprocess
import tempfile
import time

from strata_support import STRATA_BIN, free_port


class Server:
    """A `strata serve` process on a free loopback port, ready once /health answers; `model`
    None serves a models folder (give --models-dir in `args`)."""

    def __init__(self, model, *args: str, threads: int | None = None):
        self.port = free_port()
        self.log = tempfile.TemporaryFile()
        cmd = [STRATA_BIN, "serve", *(["-m", str(model)] if model else []), "--port", str(self.port), *args]
        if threads:
            cmd += ["-t", str(threads)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.log, text=True)
        self.banner = self.proc.stdout.readline()  # printed once listening
        deadline = time.time() + 60
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"strata serve exited with {self.proc.returncode}:\n{self.stderr()}")
            try:
                if self.request("GET", "/health")[0] == 200:
                    break
            except OSError:
                pass
            if time.time() > deadline:
                raise RuntimeError("strata serve did not answer /health within 60 s")
            time.sleep(0.1)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def connection(self, timeout: float = 120) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def request(self, method: str, path: str, body=None, headers=None, timeout: float = 120):
        """(status, headers, parsed JSON or text) of one request; `body` may be bytes, str or JSON."""
        conn = self.connection(timeout)
        if body is not None and not isinstance(body, (bytes, str)):
            body = json.dumps(body)
        conn.request(method, path, body=body, headers={"Content-Type": "application/json", **(headers or {})})
        resp = conn.getresponse()
        data = resp.read().decode()
        conn.close()
        try:
            data = json.loads(data)
        except ValueError:
            pass
        return resp.status, dict(resp.getheaders()), data

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM, then the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise

    def stderr(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def check_error_shape(body, status_expected: int, status: int, param=None, code=None) -> None:
    """An error in OpenAI's shape: {"error": {"message", "type", "param", "code"}}."""
    assert status == status_expected, (status, body)
    assert isinstance(body, dict) and set(body) == {"error"}, body
    err = body["error"]
    assert set(err) == {"message", "type", "param", "code"}, err
    assert isinstance(err["message"], str) and err["message"], err
    if param is not None:
        assert err["param"] == param, err
    if code is not None:
        assert err["code"] == code, err


def sse_events(resp):
    """The data of each server-sent event of a streamed response, as they arrive."""
    for raw in resp:
        line = raw.decode().rstrip("\r\n")
        if line.startswith("data: "):
            yield line[len("data: "):]

