"""Headless Chromium driven by Selenium for the web page's tests (tests/browser/).

Debian's `chromium`, `chromium-driver` and `python3-selenium`; a test exits 77 (skipped) when
one is missing. Selenium is installed for Debian's /usr/bin/python3: under another
interpreter without it, the test re-runs itself there.
"""
from __future__ import annotations

import contextlib
import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from strata_support import SOURCE_DIR, STRATA_BIN, free_port, skip  # noqa: E402

DEBIAN_PYTHON = "/usr/bin/python3"


def _import_selenium():
    try:
        import selenium  # noqa: F401
    except ImportError:
        if os.path.exists(DEBIAN_PYTHON) and os.path.realpath(sys.executable) != os.path.realpath(DEBIAN_PYTHON) \
                and not os.environ.get("STRATA_BROWSER_REEXEC"):
            os.environ["STRATA_BROWSER_REEXEC"] = "1"
            os.execv(DEBIAN_PYTHON, [DEBIAN_PYTHON, *sys.argv])
        skip("Selenium is not installed (apt-get install python3-selenium)")


_import_selenium()
from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.options import Options  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402
from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402


def browser(download_dir: Path | None = None) -> webdriver.Chrome:
    """A headless Chromium that keeps the console's messages (and saves downloads in `download_dir`)."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not chromium or not driver:
        skip("Chromium or its driver is not installed (apt-get install chromium chromium-driver)")
    opts = Options()
    opts.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,900",
                "--disable-extensions", "--no-first-run"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    if download_dir:
        opts.add_experimental_option("prefs", {"download.default_directory": str(download_dir),
                                               "download.prompt_for_download": False})
    chrome = webdriver.Chrome(service=Service(driver), options=opts)
    if download_dir:
        chrome.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(download_dir)})
    return chrome


@contextlib.contextmanager
def session(download_dir: Path | None = None):
    """A browser for one test; when the test's steps pass, the console must hold no error, and
    no notice from a library either (highlight.js 9 logs one unless told not to)."""
    driver = browser(download_dir)
    try:
        yield driver
        messages = console_messages(driver)
        errors = [m["message"] for m in messages if m["level"] == "SEVERE"]
        assert not errors, f"console errors: {errors}"
        notices = [m["message"] for m in messages if "Highlight.js" in m["message"] or "KaTeX" in m["message"]]
        assert not notices, f"console notices: {notices}"
    finally:
        driver.quit()


def console_messages(driver) -> list[dict]:
    """The console's messages since the last call, each {"level", "message"}."""
    return driver.get_log("browser")


def console_errors(driver) -> list[str]:
    """The console's errors since the last call (script errors, failed loads, CSP violations)."""
    return [e["message"] for e in console_messages(driver) if e["level"] == "SEVERE"]


def wait_for(driver, condition, timeout: float = 60, what: str = "the page"):
    # An element the page re-rendered while the condition read it (a streamed reply) is looked up again.
    return WebDriverWait(driver, timeout, poll_frequency=0.05, ignored_exceptions=(StaleElementReferenceException,)).until(
        lambda d: condition(d), f"{what} within {timeout} s")


def screenshot(driver, name: str) -> Path:
    """Saves a PNG where STRATA_SCREENSHOTS points (docs/ for README.md), else in the temp dir."""
    folder = Path(os.environ.get("STRATA_SCREENSHOTS", "/tmp/strata-screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    driver.save_screenshot(str(path))
    return path


def set_color_scheme(driver, scheme: str) -> None:
    """What the page sees as the system's preference (prefers-color-scheme: light or dark)."""
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": scheme}]})


def set_width(driver, width: int, height: int = 900) -> None:
    """The viewport `width` CSS pixels wide."""
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})


def screenshots(driver, name: str, prepare=None) -> list[Path]:
    """`name`-1400-light.png, -1400-dark.png, -400-light.png and -400-dark.png: the page in the
    system's light and dark preference, wide and narrow; `prepare(driver)` runs after each
    change (to open something or wait for the page to settle)."""
    shots = []
    for width in (1400, 400):
        for scheme in ("light", "dark"):
            set_width(driver, width)
            set_color_scheme(driver, scheme)
            wait_for(driver, lambda d: d.execute_script("return document.documentElement.dataset.theme") == scheme, 5,
                     f"the {scheme} theme")
            if prepare:
                prepare(driver)
            time.sleep(0.3)  # the drawer's slide, the charts' redraw
            shots.append(screenshot(driver, f"{name}-{width}-{scheme}.png"))
    set_width(driver, 1400)
    set_color_scheme(driver, "light")
    return shots


class Served:
    """Something serving HTTP on 127.0.0.1:`port`, for one `with` block."""
    port = 0

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def __enter__(self):
        return self


class Front(Served):
    """A server in front of a strata server, on a port of its own: it passes each request
    through (one origin for the page, the same headers) but those `routes` answers:
    routes[(method, path)](handler, json_body) writes the answer. `requests` keeps each
    request's (method, path, JSON body), to check what the page sent."""

    def __init__(self, upstream: str, routes: dict):
        front = self
        self.requests: list[tuple[str, str, object]] = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def answer(self, method: str) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0)) if method == "POST" else b""
                try:
                    parsed = json.loads(body) if body else None
                except ValueError:
                    parsed = None
                front.requests.append((method, self.path, parsed))
                self.close_connection = True
                if (method, self.path) in routes:
                    return routes[(method, self.path)](self, parsed)
                req = urllib.request.Request(upstream + self.path, data=body if method == "POST" else None, method=method,
                                             headers={k: v for k, v in self.headers.items() if k.lower() != "host"})
                try:
                    resp = urllib.request.urlopen(req, timeout=120)
                except urllib.error.HTTPError as e:
                    resp = e
                self.send_response(resp.status)
                for k, v in resp.headers.items():
                    if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(k, v)
                self.end_headers()
                try:  # a chunk at a time: streams (the engine view's metrics) pass as they come
                    while chunk := resp.read1(65536):
                        self.wfile.write(chunk)
                        self.wfile.flush()
                except OSError:
                    pass  # the page went away

            def do_GET(self):
                self.answer("GET")

            def do_POST(self):
                self.answer("POST")

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def send_json(handler, obj, status: int = 200) -> None:
    data = json.dumps(obj).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def stream_chat(handler, pieces, before_piece=None) -> None:
    """Answers a chat completion with `pieces` as a stream of chunks (a piece: the content's text,
    or a whole delta), each sent once before_piece(i) returns (a pause, or a gate the test
    opens), then the end."""
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.end_headers()
    for i, piece in enumerate(pieces):
        if before_piece:
            before_piece(i)
        delta = piece if isinstance(piece, dict) else {"content": piece}
        chunk = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
        handler.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        handler.wfile.flush()
    end = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    handler.wfile.write(f"data: {json.dumps(end)}\n\ndata: [DONE]\n\n".encode())
    handler.wfile.flush()


class Process(Served):
    """A strata command serving HTTP on a free port; ready once `ready_path` answers."""

    def __init__(self, *args: str, ready_path: str):
        import urllib.request

        self.port = free_port()
        self.proc = subprocess.Popen([STRATA_BIN, *args, "--port", str(self.port)], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 60
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"strata {' '.join(args)} exited: {self.proc.stderr.read()}")
            try:
                with urllib.request.urlopen(self.url(ready_path), timeout=5):
                    break
            except OSError:
                if time.time() > deadline:
                    raise RuntimeError(f"strata {' '.join(args)} did not answer within 60 s")
                time.sleep(0.1)

    def __exit__(self, *exc):
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def streaming(driver) -> bool:
    """Whether the chat page is receiving a reply."""
    return driver.execute_script("return document.body.classList.contains('streaming')")


def send_message(driver, text: str, max_tokens: int) -> None:
    """Types `text` into the chat page and sends it, asking for at most `max_tokens`."""
    field = driver.find_element(By.ID, "max-tokens")
    field.clear()
    field.send_keys(str(max_tokens))
    prompt = driver.find_element(By.ID, "prompt")
    prompt.send_keys(text)
    prompt.send_keys(Keys.ENTER)


@contextlib.contextmanager
def stubbed_chat(pieces, pause: float = 0.02):
    """The chat page of `strata serve` on the default model, its chat completions
    answered by a stub that streams `pieces` (stream_chat), the page loaded: (driver, front)."""
    from strata_support import default_model

    with Process("serve", "-m", str(default_model()), ready_path="/health") as real, \
            Front(real.url("").rstrip("/"), {("POST", "/v1/chat/completions"):
                                             lambda h, body: stream_chat(h, pieces, lambda i: time.sleep(pause))}) as front:
        with session() as driver:
            driver.get(front.url("/"))
            wait_for(driver, lambda d: d.find_element(By.ID, "model-name").text, 30, "the page")
            yield driver, front


def ask(driver, text: str, replies: int = 1) -> None:
    """Sends `text` from the chat page and waits until `replies` replies have ended."""
    prompt = driver.find_element(By.ID, "prompt")
    prompt.send_keys(text)
    prompt.send_keys(Keys.ENTER)
    wait_for(driver, lambda d: not streaming(d) and len(d.find_elements(By.CSS_SELECTOR, ".message.assistant .stats")) >= replies,
             30, "the reply")


def metrics(server: Served) -> dict[str, float]:
    """The server's /metrics, sample name (with labels) -> value."""
    with urllib.request.urlopen(server.url("/metrics"), timeout=10) as r:
        return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in r.read().decode().splitlines()
                if line and not line.startswith("#")}


__all__ = ["SOURCE_DIR", "STRATA_BIN", "Front", "Process", "ask", "browser", "console_errors", "console_messages", "metrics",
           "screenshot", "screenshots", "send_json", "send_message", "session", "set_color_scheme", "set_width", "skip",
           "stream_chat", "streaming", "stubbed_chat", "wait_for"]
