"""The chat page of `strata serve` in a real browser, with the default model (skipped when it
has not been fetched): a message gets a reply that arrives in pieces (streamed) with its
tokens/s, and the engine view (the server's metrics stream) counts its tokens, says then that
nothing is generating any more, as /metrics does, and draws the model's placement; Escape stops a
long reply, which then grows no more and the server cancels it; Alt+R regenerates and the
Stop button stops; editing a turn drops what followed and asks again; the conversation and the
settings survive a reload; one model shows no model picker; nothing reaches the console's
error log."""
import json
import re
import sys
import time

from browser_support import Process, metrics, send_message, session, streaming, wait_for  # first: finds Selenium
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from strata_support import default_model


def last(driver, selector: str) -> str:
    """The text of the last element matching `selector`, read in one step (the page redraws)."""
    return driver.execute_script("const e = document.querySelectorAll(arguments[0]); return e.length ? e[e.length - 1].innerText : '';",
                                 selector)


def reply_text(driver) -> str:
    return last(driver, ".message.assistant .content")


def main() -> int:
    model = default_model()
    with Process("serve", "-m", str(model), ready_path="/health") as server:
        with session() as driver:
            driver.get(server.url("/"))
            wait_for(driver, lambda d: d.find_element(By.ID, "model-name").text, 30, "the model's name")

            # A reply arrives in pieces: the page shows it growing while the stream is open.
            send_message(driver, "Write a long story about a lighthouse keeper.", 200)
            seen = set()
            deadline = time.time() + 120
            while time.time() < deadline:
                text, live = reply_text(driver), streaming(driver)
                if live and text:
                    seen.add(len(text))
                if not live and text:
                    break
                time.sleep(0.02)
            assert len(seen) >= 2, f"the reply did not arrive in pieces: lengths seen while streaming {sorted(seen)}"
            stats = last(driver, ".message.assistant .stats")
            assert "tokens/s" in stats and "cached" in stats, stats
            # The engine view follows the server's stream: it counts the reply's tokens and, from
            # then on (read in that order), says nothing is generating; /metrics agrees. 60 s only
            # guards against a hang.
            n_reply = re.search(r"(\d+) tokens ·", stats).group(1)
            generated = "#engine-stats dd[data-row='Generated']"
            wait_for(driver, lambda d: d.find_element(By.CSS_SELECTOR, generated).text == f"{n_reply} tokens"
                     and d.find_element(By.ID, "engine-stats").get_attribute("data-running") == "0", 60,
                     "the engine view to count the reply and say nothing is generating")
            quiet = metrics(server)
            assert quiet["strata_requests_running"] == 0 and quiet["strata_generated_tokens_total"] == int(n_reply), quiet
            # (the stream, not a poll of /metrics: an open stream has no resource entry until it ends)
            assert not driver.execute_script("return performance.getEntriesByType('resource').some((e) => e.name.endsWith('/metrics'))")
            assert driver.find_element(By.ID, "stop").get_attribute("hidden") is not None
            # Where the engine placed the model: SmolLM2-135M's 30 layers, each as weights, KV and attention.
            bars = driver.find_elements(By.CSS_SELECTOR, "#engine-placement rect[data-layer]")
            assert len(bars) == 3 * 30, f"{len(bars)} bars for the served model's placement"
            assert driver.find_element(By.ID, "model-choice").get_attribute("hidden") is not None, "a picker for one model"

            # Escape stops a reply that would run for thousands of tokens.
            cancelled = metrics(server)["strata_requests_cancelled_total"]
            send_message(driver, "Tell me everything you know about the sea, at great length.", 3000)
            wait_for(driver, lambda d: streaming(d) and len(reply_text(d)) > 20, 60, "the long reply to start")
            driver.find_element(By.ID, "prompt").send_keys(Keys.ESCAPE)
            wait_for(driver, lambda d: not streaming(d), 10, "the reply to stop")
            stopped_at = reply_text(driver)
            assert "stopped" in last(driver, ".message.assistant .stats")
            wait_for(driver, lambda d: metrics(server)["strata_requests_cancelled_total"] > cancelled, 30,
                     "the server to cancel the request")
            # The running gauge drops as the cancelled request is retired, just after the count.
            wait_for(driver, lambda d: metrics(server)["strata_requests_running"] == 0, 10, "the cancelled request to end")
            time.sleep(0.5)
            assert reply_text(driver) == stopped_at, "the reply grew after Stop"

            # The conversation is kept in the browser's storage.
            def saved_messages():
                return json.loads(driver.execute_script("return localStorage.getItem('strata.conversations')"))[0]["messages"]
            assert [m["role"] for m in saved_messages()] == ["user", "assistant", "user", "assistant"]

            # Alt+R regenerates the last reply (a new request), and the Stop button ends it.
            driver.find_element(By.ID, "prompt").send_keys(Keys.ALT, "r")
            wait_for(driver, lambda d: streaming(d) and reply_text(d), 60, "the regenerated reply")
            driver.find_element(By.ID, "stop").click()
            wait_for(driver, lambda d: not streaming(d), 10, "the regenerated reply to stop")
            assert [m["role"] for m in saved_messages()] == ["user", "assistant", "user", "assistant"]

            # Editing the first turn drops what followed it and asks again: a short reply, so that a
            # model that rambles on a loaded machine still ends within the wait.
            field = driver.find_element(By.ID, "max-tokens")
            field.clear()
            field.send_keys("40")
            driver.find_element(By.CSS_SELECTOR, ".message.user .edit").click()
            area = driver.find_element(By.CSS_SELECTOR, ".message.user textarea")
            area.clear()
            area.send_keys("Name three colours.", Keys.ENTER)
            wait_for(driver, lambda d: not streaming(d) and len(d.find_elements(By.CSS_SELECTOR, ".message")) == 2, 120,
                     "the reply to the edited turn")
            messages = saved_messages()
            assert [m["role"] for m in messages] == ["user", "assistant"] and messages[0]["content"] == "Name three colours."
            assert messages[1]["content"], "no reply to the edited turn"

            # Settings and the conversation survive a reload.
            driver.find_element(By.ID, "temperature").send_keys(Keys.RIGHT)
            temperature = driver.find_element(By.ID, "temperature").get_attribute("value")
            shown = reply_text(driver)
            driver.refresh()
            wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, ".message.assistant"), 30, "the conversation after a reload")
            assert driver.find_element(By.ID, "max-tokens").get_attribute("value") == "40"
            assert driver.find_element(By.ID, "temperature").get_attribute("value") == temperature != "0.7"
            assert reply_text(driver) == shown
    print("ok: a streamed reply, stop, regenerate and edit, with no console error")
    return 0


if __name__ == "__main__":
    sys.exit(main())
