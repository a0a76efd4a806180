"""The chat page's controls, against `strata serve` with the default model behind a stub that
says it serves two models (and answers chat completions itself, recording what was asked):
the model picker shows, the choice survives a reload and goes into the request; a
conversation exported from the page is what `strata chat --load` reads, and one `strata chat`
saved with /save imports (a malformed file is refused, naming the problem); text files
attach as fenced blocks named by the file (a binary file is refused); the token counter shows
the server's count of the message and of the whole conversation (a max_tokens the context cannot
hold beside it is left out of the request, not refused by the server); dark mode follows the
system's preference until the Theme button says otherwise, and that choice survives a reload."""
import atexit
import json
import os
import shutil
import sys
import tempfile
import urllib.request
from pathlib import Path

from browser_support import Front, Process, send_json, session, set_color_scheme, stream_chat, wait_for  # first: Selenium
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from chat_terminal import Terminal
from strata_support import default_model



def post(url: str, body: dict) -> dict:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def terminal_save(model: Path, load: Path | None, message: str | None, path: Path, cache: Path) -> None:
    """`strata chat` on a terminal: --load `load`, say `message`, then /save `path`."""
    chat = Terminal("-m", str(model), "-n", "8", *(["--load", str(load)] if load else []),
                    env=dict(os.environ, TERM="xterm", XDG_CACHE_HOME=str(cache)))
    if message:
        chat.say(message)
    out = chat.command(f"/save {path}")
    assert chat.leave(b"/exit\r") == 0, out


def two_models(real_models: dict, names: list):
    def answer(handler, body):
        meta = real_models["data"][0]["meta"]
        send_json(handler, {"object": "list", "data": [{"id": m, "object": "model", "owned_by": "strata", "meta": meta} for m in names]})
    return answer


def main() -> int:
    model = default_model()
    tmp = Path(tempfile.mkdtemp(prefix="strata-web-controls-"))
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)
    downloads = tmp / "downloads"
    downloads.mkdir()
    with Process("serve", "-m", str(model), ready_path="/health") as real:
        real_models = json.loads(urllib.request.urlopen(real.url("/v1/models"), timeout=10).read())
        # A second name beside the real model's; the one chosen is the real one, whose tokenizer counts.
        MODELS = ["smollm2-other", real_models["data"][0]["id"]]
        routes = {("GET", "/v1/models"): two_models(real_models, MODELS),
                  ("POST", "/v1/chat/completions"): lambda h, body: stream_chat(h, ["Hello ", "from the stub."])}
        with Front(real.url("").rstrip("/"), routes) as front, session(downloads) as driver:
            driver.get(front.url("/"))
            picker = wait_for(driver, lambda d: d.find_element(By.ID, "model-choice").is_displayed()
                              and d.find_element(By.ID, "model-picker"), 30, "the model picker")
            assert [o.get_attribute("value") for o in picker.find_elements(By.TAG_NAME, "option")] == MODELS
            picker.find_element(By.CSS_SELECTOR, f"option[value='{MODELS[1]}']").click()
            driver.refresh()
            wait_for(driver, lambda d: d.find_element(By.ID, "model-picker").get_attribute("value") == MODELS[1], 30,
                     "the chosen model after a reload")

            # The token counter: the server's count of the message, and of the conversation with it.
            text = "How many tokens are in this message, counted by the model's own tokenizer?"
            driver.find_element(By.ID, "prompt").send_keys(text)
            own = len(post(real.url("/tokenize"), {"content": text})["tokens"])
            rendered = post(real.url("/apply-template"), {"messages": [{"role": "user", "content": text}]})["prompt"]
            total = len(post(real.url("/tokenize"), {"content": rendered, "parse_special": True})["tokens"])
            counter = wait_for(driver, lambda d: d.find_element(By.ID, "token-count").get_attribute("data-tokens") == str(own)
                               and d.find_element(By.ID, "token-count"), 10, "the token count")
            assert counter.get_attribute("data-total") == str(total), (counter.text, total)
            assert f"of {real_models['data'][0]['meta']['n_ctx']}" in counter.text, counter.text

            # Sending: the request names the chosen model.
            driver.find_element(By.ID, "prompt").send_keys(Keys.ENTER)
            wait_for(driver, lambda d: "from the stub" in d.find_elements(By.CSS_SELECTOR, ".message.assistant .content")[-1].text
                     and not d.execute_script("return document.body.classList.contains('streaming')"), 30, "the reply")
            asked = [body for method, path, body in front.requests if path == "/v1/chat/completions"]
            assert asked[-1]["model"] == MODELS[1] and asked[-1]["max_tokens"] == 512, asked[-1]

            # Export: the file `strata chat --load` reads; the terminal carries the conversation on.
            driver.find_element(By.ID, "export").click()
            exported = wait_for(driver, lambda d: next(downloads.glob("*.json"), None), 10, "the exported file")
            saved = json.loads(exported.read_text())
            assert saved == {"template": "", "system": "", "messages": [{"role": "user", "content": text},
                                                                       {"role": "assistant", "content": "Hello from the stub."}]}, saved
            resaved = tmp / "resaved.json"
            terminal_save(model, exported, None, resaved, tmp / "cache")
            assert json.loads(resaved.read_text())["messages"] == saved["messages"]

            # Import: a conversation `strata chat` saved.
            from_terminal = tmp / "from-terminal.json"
            terminal_save(model, None, "Name a colour.", from_terminal, tmp / "cache")
            wanted = json.loads(from_terminal.read_text())
            driver.find_element(By.ID, "import").send_keys(str(from_terminal))
            wait_for(driver, lambda d: "Imported" in d.find_element(By.ID, "store-status").text, 10, "the import")
            shown = [(m.get_attribute("class").split()[1], m.find_element(By.CSS_SELECTOR, ".content").text)
                     for m in driver.find_elements(By.CSS_SELECTOR, "#messages .message")]
            assert [role for role, _ in shown] == [m["role"] for m in wanted["messages"]]
            assert shown[0][1] == wanted["messages"][0]["content"]
            bad = tmp / "bad.json"
            bad.write_text(json.dumps({"messages": [{"role": "system", "content": "x"}]}))
            driver.find_element(By.ID, "import").send_keys(str(bad))
            wait_for(driver, lambda d: "message 1 has role 'system'" in d.find_element(By.ID, "store-status").text, 10,
                     "the refusal of a malformed file")

            # Attachments: a text file as a fenced block (a fence longer than the file's own), a binary refused.
            source = tmp / "fence.md"
            source.write_text("Some code:\n```sh\necho hi\n```\n")
            driver.find_element(By.ID, "attach").send_keys(str(source))
            wait_for(driver, lambda d: "fence.md:" in d.find_element(By.ID, "prompt").get_attribute("value"), 10, "the attachment")
            value = driver.find_element(By.ID, "prompt").get_attribute("value")
            assert value.endswith("fence.md:\n````markdown\nSome code:\n```sh\necho hi\n```\n````\n"), repr(value)
            binary = tmp / "weights.bin"
            binary.write_bytes(bytes(range(256)))
            driver.find_element(By.ID, "attach").send_keys(str(binary))
            wait_for(driver, lambda d: "weights.bin is not a text file" in d.find_element(By.ID, "composer-status").text, 10,
                     "the refusal of a binary file")

            # A max_tokens the context cannot hold beside the conversation is left out of the request (the
            # server would refuse it): the reply runs to the context's end, as the counter says it may.
            n_ctx = real_models["data"][0]["meta"]["n_ctx"]
            driver.execute_script("document.getElementById('max-tokens').value = arguments[0]", n_ctx)
            driver.find_element(By.ID, "prompt").clear()
            driver.find_element(By.ID, "prompt").send_keys("And one more question?")
            wait_for(driver, lambda d: "may be cut at the context" in d.find_element(By.ID, "token-count").text, 10,
                     "the counter's warning")
            driver.find_element(By.ID, "prompt").send_keys(Keys.ENTER)
            wait_for(driver, lambda d: len([p for _, p, _ in front.requests if p == "/v1/chat/completions"]) > len(asked)
                     and not d.execute_script("return document.body.classList.contains('streaming')"), 30, "the second reply")
            last = [body for method, path, body in front.requests if path == "/v1/chat/completions"][-1]
            assert "max_tokens" not in last, last

            # Dark mode: the system's preference, until the Theme button chooses; the choice is kept.
            theme = lambda d: d.execute_script("return document.documentElement.dataset.theme")  # noqa: E731
            background = lambda d: d.execute_script("return getComputedStyle(document.body).backgroundColor")  # noqa: E731
            set_color_scheme(driver, "dark")
            wait_for(driver, lambda d: theme(d) == "dark", 5, "the dark theme")
            assert sum(int(x) for x in background(driver)[4:-1].split(",")) < 150, background(driver)
            driver.find_element(By.ID, "theme").click()  # auto -> light
            assert theme(driver) == "light" and "light" in driver.find_element(By.ID, "theme").text
            driver.refresh()
            wait_for(driver, lambda d: d.find_element(By.ID, "theme").text == "Theme: light", 10, "the kept choice")
            assert theme(driver) == "light"
            driver.find_element(By.ID, "theme").click()  # light -> dark
            driver.find_element(By.ID, "theme").click()  # dark -> auto: the system's dark again
            assert theme(driver) == "dark" and driver.find_element(By.ID, "theme").text == "Theme: auto"
    print("ok: model picker, export/import with strata chat, attachments, token counter, dark mode")
    return 0


if __name__ == "__main__":
    sys.exit(main())
