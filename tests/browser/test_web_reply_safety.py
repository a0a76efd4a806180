"""A reply is untrusted: the chat page must render `<script>`, `<img onerror>`, `javascript:`
links and the like as inert text. The model is made to "say" them deterministically by a stub
in front of `strata serve`: it passes the page and every other request through to the real
server (same origin, same headers), and answers /v1/chat/completions with a crafted stream.
Nothing may run: no marker set, no alert, no console error; the HTML shows as text and the
Markdown around it renders."""
import http.server
import json
import sys
import threading
import time
import urllib.error
import urllib.request

from browser_support import Process, session, wait_for  # first: finds Selenium
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from strata_support import default_model, free_port

HOSTILE = [
    "**Bold** and safe. ",
    "<script>window.__pwned = 'script'</script>",
    "<img src=x onerror=\"window.__pwned = 'img'\">",
    "<svg onload=\"window.__pwned = 'svg'\"></svg>",
    "[a link](javascript:window.__pwned='link') ",
    "<a href=\"javascript:window.__pwned='href'\" id=\"hostile-link\">click</a>",
    "<iframe srcdoc=\"<script>parent.__pwned='iframe'</script>\"></iframe>",
    "<div onclick=\"window.__pwned='div'\" id=\"hostile-div\">div</div>",
    "\n\n```python\nprint('<script>alert(1)</script>')\n```\n",
]


def stub(upstream: str):
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def proxy(self, method: str) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0)) if method == "POST" else None
            req = urllib.request.Request(upstream + self.path, data=body, method=method,
                                         headers={k: v for k, v in self.headers.items() if k.lower() != "host"})
            try:
                resp = urllib.request.urlopen(req, timeout=60)
            except urllib.error.HTTPError as e:
                resp = e
            data = resp.read()
            self.send_response(resp.status)
            for k, v in resp.headers.items():
                if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self.proxy("GET")

        def do_POST(self):
            if self.path != "/v1/chat/completions":
                return self.proxy("POST")
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for piece in HOSTILE:
                chunk = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()
                time.sleep(0.02)
            end = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
            self.wfile.write(f"data: {json.dumps(end)}\n\ndata: [DONE]\n\n".encode())
            self.close_connection = True

    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main() -> int:
    model = default_model()
    with Process("serve", "-m", str(model), ready_path="/health") as real:
        front = stub(real.url("").rstrip("/"))
        try:
            with session() as driver:
                driver.get(f"http://127.0.0.1:{front.server_address[1]}/")
                wait_for(driver, lambda d: d.find_element(By.ID, "model-name").text, 30, "the page")
                prompt = driver.find_element(By.ID, "prompt")
                prompt.send_keys("Say something hostile.")
                prompt.send_keys(Keys.ENTER)
                wait_for(driver, lambda d: not d.execute_script("return document.body.classList.contains('streaming')")
                         and d.find_elements(By.CSS_SELECTOR, ".message.assistant .stats"), 30, "the reply")
                # Give anything that was inserted a chance to run, and click what could carry a handler.
                for target in driver.find_elements(By.CSS_SELECTOR, "#hostile-div, #hostile-link, .message.assistant a"):
                    try:
                        target.click()
                    except Exception:
                        pass
                time.sleep(0.5)
                assert driver.execute_script("return window.__pwned === undefined"), driver.execute_script("return window.__pwned")
                try:
                    driver.switch_to.alert
                    raise AssertionError("an alert opened")
                except NoAlertPresentException:
                    pass
                reply = driver.find_element(By.CSS_SELECTOR, ".message.assistant .content")
                for selector in ("script", "img", "svg", "iframe", "[onerror]", "[onload]", "[onclick]", "a[href^='javascript']"):
                    assert not reply.find_elements(By.CSS_SELECTOR, selector), f"the reply holds {selector}"
                rich = driver.execute_script("return Strata.rich")
                if rich:
                    assert reply.find_element(By.CSS_SELECTOR, "strong").text == "Bold"
                    code = reply.find_element(By.CSS_SELECTOR, "pre code")
                    assert "<script>alert(1)</script>" in code.text and "hljs" in code.get_attribute("class")
                # What the model wrote stays readable, as text.
                assert "<script>window.__pwned = 'script'</script>" in reply.text, reply.text
        finally:
            front.shutdown()
    print(f"ok: a hostile reply rendered inert ({'Markdown' if rich else 'plain text'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
