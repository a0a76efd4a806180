"""A page served from another origin calls `strata serve` from headless Chromium: with
--cors-origin naming that origin, the browser's preflight (OPTIONS, for the Authorization
header and a JSON body) is answered 204 and the OpenAI and Ollama endpoints, streamed or not,
answer the page; a page from an origin not named gets nothing (the browser blocks it)."""
import functools
import http.client
import http.server
import json
import tempfile
import threading
import time
from pathlib import Path

from browser_support import Process, console_errors, session, wait_for  # first: finds Selenium

from strata_support import free_port, tiny_llama

KEY = "cors-test-key"
PAGE = """<!doctype html><meta charset="utf-8"><title>elsewhere</title><link rel="icon" href="data:,"><script>
window.__results = {};
(async () => {
  const S = "%SERVER%", auth = {Authorization: "Bearer %KEY%"};
  const json = {...auth, "Content-Type": "application/json"};
  try {
    const models = await (await fetch(S + "/v1/models", {headers: auth})).json();
    window.__results.models = models.data.map(m => m.id);
    const stream = await fetch(S + "/v1/chat/completions", {method: "POST", headers: json, body: JSON.stringify(
        {model: "%MODEL%", messages: [{role: "user", content: "Hi"}], max_tokens: 8, stream: true})});
    window.__results.streamed = (await stream.text()).includes("data: [DONE]");
    const ollama = await fetch(S + "/api/chat", {method: "POST", headers: json, body: JSON.stringify(
        {model: "%MODEL%", messages: [{role: "user", content: "Hi"}], stream: false, options: {num_predict: 4}})});
    window.__results.ollama = (await ollama.json()).done;
  } catch (e) {
    window.__results.error = String(e);
  }
  window.__done = true;
})();
</script>"""


class QuietFiles(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def serve_page(folder: Path) -> tuple[http.server.ThreadingHTTPServer, int]:
    """The folder's files on another origin (another port) than the server's."""
    port = free_port()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), functools.partial(QuietFiles, directory=str(folder)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, port


def preflight(server_port: int, origin: str) -> tuple[int, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", server_port, timeout=30)
    conn.request("OPTIONS", "/v1/chat/completions", headers={
        "Origin": origin, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization,content-type"})
    resp = conn.getresponse()
    resp.read()
    return resp.status, dict(resp.getheaders())


def main() -> None:
    start = time.time()
    model = tiny_llama()
    with tempfile.TemporaryDirectory() as d:
        page_server, page_port = serve_page(Path(d))
        other_server, other_port = serve_page(Path(d))
        allowed = f"http://127.0.0.1:{page_port}"
        with Process("serve", "-m", str(model), "--api-key", KEY, "--cors-origin", allowed, ready_path="/health") as strata:
            (Path(d) / "page.html").write_text(PAGE.replace("%SERVER%", strata.url("")).replace("%KEY%", KEY)
                                               .replace("%MODEL%", model.stem))
            status, headers = preflight(strata.port, allowed)
            assert status == 204, (status, headers)
            assert headers.get("Access-Control-Allow-Origin") == allowed, headers
            assert "POST" in headers.get("Access-Control-Allow-Methods", ""), headers
            assert "Authorization" in headers.get("Access-Control-Allow-Headers", ""), headers
            status, headers = preflight(strata.port, f"http://127.0.0.1:{other_port}")
            assert status == 403 and "Access-Control-Allow-Origin" not in headers, (status, headers)

            with session() as driver:
                driver.get(f"{allowed}/page.html")
                wait_for(driver, lambda dr: dr.execute_script("return window.__done"), 120, "the page's calls")
                results = driver.execute_script("return window.__results")
                assert results == {"models": [model.stem], "streamed": True, "ollama": True}, results

                driver.get(f"http://127.0.0.1:{other_port}/page.html")
                wait_for(driver, lambda dr: dr.execute_script("return window.__done"), 60, "the page's calls")
                results = driver.execute_script("return window.__results")
                assert "Failed to fetch" in results.get("error", ""), results
                blocked = console_errors(driver)  # the browser reports the block; expected here, so taken off the log
                assert any("CORS" in e or "Access-Control" in e for e in blocked), blocked
        page_server.shutdown()
        other_server.shutdown()
    print(f"ok ({time.time() - start:.1f} s)")


if __name__ == "__main__":
    main()
